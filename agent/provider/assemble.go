package provider

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Assembler builds the complete Response of one streamed call from its
// pieces and forwards each piece to the caller as an Event, in arrival
// order. Adapters use it so that every provider numbers tool calls, fills
// in missing ids and repairs arguments the same way.
type Assembler struct {
	emit    func(Event)
	text    strings.Builder
	calls   []*assembledCall
	reason  []*Reasoning
	emitted bool
}

type assembledCall struct {
	id, name string
	args     strings.Builder
}

// NewAssembler returns an Assembler that calls fn (which may be nil) for
// each event.
func NewAssembler(fn func(Event)) *Assembler {
	return &Assembler{emit: fn}
}

func (a *Assembler) send(ev Event) {
	a.emitted = true
	if a.emit != nil {
		a.emit(ev)
	}
}

// Emitted reports whether any event reached the caller: after that, a
// failed call must not be retried, or the caller would see text twice.
func (a *Assembler) Emitted() bool { return a.emitted }

// Text adds assistant text.
func (a *Assembler) Text(s string) {
	if s == "" {
		return
	}
	a.text.WriteString(s)
	a.send(Event{Type: EventText, Text: s})
}

// StartReasoning opens the next reasoning block of kind typ and returns
// its index.
func (a *Assembler) StartReasoning(typ string) int {
	a.reason = append(a.reason, &Reasoning{Type: typ})
	return len(a.reason) - 1
}

// ReasoningText adds readable reasoning to block i (opening a block of
// ReasoningText when there is none, as OpenAI-compatible streams have no
// blocks).
func (a *Assembler) ReasoningText(i int, s string) {
	if s == "" {
		return
	}
	if i < 0 || i >= len(a.reason) {
		if len(a.reason) == 0 {
			a.StartReasoning(ReasoningText)
		}
		i = len(a.reason) - 1
	}
	a.reason[i].Text += s
	a.send(Event{Type: EventReasoning, Index: i, Text: s})
}

// ReasoningSignature adds to the signature of block i.
func (a *Assembler) ReasoningSignature(i int, sig string) {
	if i >= 0 && i < len(a.reason) {
		a.reason[i].Signature += sig
	}
}

// ReasoningData sets the opaque content of a redacted block i.
func (a *Assembler) ReasoningData(i int, data string) {
	if i >= 0 && i < len(a.reason) {
		a.reason[i].Data = data
	}
}

// StartToolCall opens the next tool call and returns its index in the
// response (0, 1, …).
func (a *Assembler) StartToolCall(id, name string) int {
	i := len(a.calls)
	a.calls = append(a.calls, &assembledCall{id: id, name: name})
	a.send(Event{Type: EventToolCallStart, Index: i, ToolCallID: id, Name: name})
	return i
}

// ToolCallArgs adds a piece of the JSON arguments of call i.
func (a *Assembler) ToolCallArgs(i int, delta string) {
	if delta == "" || i < 0 || i >= len(a.calls) {
		return
	}
	a.calls[i].args.WriteString(delta)
	a.send(Event{Type: EventToolCallDelta, Index: i, ArgsDelta: delta})
}

// ToolCalls is the number of tool calls so far.
func (a *Assembler) ToolCalls() int { return len(a.calls) }

// Response is the complete response. A call without an id gets "call_<i>";
// empty arguments become {}; arguments that are not valid JSON (a stream
// cut by max_tokens, a model's mistake) are kept as a JSON string of the
// raw text, so the response stays valid JSON and the tool reports a bad
// input the model can fix. With tool calls, a stop reason other than
// max_tokens becomes tool_calls (some servers say "stop" after calls).
func (a *Assembler) Response(stop string, usage Usage) *Response {
	r := &Response{Text: a.text.String(), StopReason: stop, Usage: usage}
	for _, b := range a.reason {
		r.Reasoning = append(r.Reasoning, *b)
	}
	for i, c := range a.calls {
		id := c.id
		if id == "" {
			id = "call_" + strconv.Itoa(i)
		}
		r.ToolCalls = append(r.ToolCalls, ToolCall{ID: id, Name: c.name, Arguments: FixArguments(c.args.String())})
	}
	if len(r.ToolCalls) > 0 && r.StopReason != "max_tokens" {
		r.StopReason = "tool_calls"
	}
	if r.StopReason == "" {
		r.StopReason = "end"
	}
	return r
}

// FixArguments returns raw as valid JSON: {} when empty, raw itself when
// valid, otherwise raw as a JSON string.
func FixArguments(raw string) json.RawMessage {
	t := strings.TrimSpace(raw)
	if t == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(raw)
	return b
}
