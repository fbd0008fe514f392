package apptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/desk-runtime/desk/execution"
)

// Executor is a scriptable stand-in for the agent. The message text says
// what a turn does:
//
//	reply <text>      start, answer <text>
//	fail <msg>        start, then fail
//	failstart <msg>   fail before the handshake
//	block             start, then wait for an interrupt
//	stall             never finish the handshake; wait for an interrupt
//	slowstop <ms>     start, wait for an interrupt, then take <ms> to stop
//	ignorestop <ms>   start, ignore interrupts for <ms>, then return
//	gate <name>       start, wait until Open(<name>) or an interrupt
//	sleep <ms>        start, sleep, answer "slept"
//	emit <n>          start, emit n events, answer "emitted"
//	scratch           start, write a file in scratch, answer its path
//
// Anything else is answered with "ok: <text>". Every call is recorded.
type Executor struct {
	mu      sync.Mutex
	calls   []Call
	gates   map[string]chan struct{}
	running map[string]int // per surface, to catch two at once
	maxRun  map[string]int
}

// Call is one Execute call.
type Call struct {
	ExecutionID, SurfaceID, ItemID, Text string
	Scratch                              string
}

// NewExecutor returns an executor with no calls.
func NewExecutor() *Executor {
	return &Executor{gates: map[string]chan struct{}{}, running: map[string]int{}, maxRun: map[string]int{}}
}

func (e *Executor) gate(name string) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gates[name]
	if g == nil {
		g = make(chan struct{})
		e.gates[name] = g
	}
	return g
}

// Open releases every turn waiting on the gate.
func (e *Executor) Open(name string) { close(e.gate(name)) }

// Calls returns the calls so far.
func (e *Executor) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Call(nil), e.calls...)
}

// MaxConcurrent is the most executions one surface ever had at once.
func (e *Executor) MaxConcurrent(surface string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.maxRun[surface]
}

// Execute implements execution.Executor.
func (e *Executor) Execute(ctx context.Context, t *execution.Turn) (*execution.Outcome, error) {
	text := t.Item.Text
	cmd, arg, _ := strings.Cut(text, " ")
	e.mu.Lock()
	e.calls = append(e.calls, Call{ExecutionID: t.Execution.ID, SurfaceID: t.Execution.SurfaceID, ItemID: t.Item.ID, Text: text, Scratch: t.Scratch})
	srf := t.Execution.SurfaceID
	e.running[srf]++
	if e.running[srf] > e.maxRun[srf] {
		e.maxRun[srf] = e.running[srf]
	}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running[srf]--
		e.mu.Unlock()
	}()
	ms := func() time.Duration { n, _ := strconv.Atoi(arg); return time.Duration(n) * time.Millisecond }
	if cmd == "failstart" {
		return nil, errors.New(arg)
	}
	if cmd == "stall" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := t.Started(); err != nil {
		return nil, err
	}
	switch cmd {
	case "reply":
		return &execution.Outcome{Reply: arg}, nil
	case "fail":
		return nil, errors.New(arg)
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case "slowstop":
		<-ctx.Done()
		time.Sleep(ms())
		return nil, ctx.Err()
	case "ignorestop":
		time.Sleep(ms())
		return &execution.Outcome{Reply: "ignored the stop"}, nil
	case "gate":
		select {
		case <-e.gate(arg):
			return &execution.Outcome{Reply: "gate " + arg + " opened"}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "sleep":
		select {
		case <-time.After(ms()):
			return &execution.Outcome{Reply: "slept"}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "emit":
		n, _ := strconv.Atoi(arg)
		for i := range n {
			t.Emit("assistant.delta", map[string]any{"text": fmt.Sprintf("part %d ", i)})
		}
		return &execution.Outcome{Reply: "emitted"}, nil
	case "scratch":
		p := t.Scratch + "/work.txt"
		if err := os.WriteFile(p, []byte("temporary"), 0o644); err != nil {
			return nil, err
		}
		return &execution.Outcome{Reply: p}, nil
	}
	return &execution.Outcome{Reply: "ok: " + text}, nil
}
