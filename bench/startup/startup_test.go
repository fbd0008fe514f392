// Package startup benchmarks how long desk takes from exec to answering
// /healthz on an empty home (the target is 100 ms), with the real binary
// built once:
//
//	go test -run '^$' -bench . -benchtime 10x ./bench/startup
//
// Each iteration starts a fresh desk on a fresh home and a free port,
// polls /healthz every millisecond until it answers, and stops desk. The
// reference beside it is the same binary's `desk version`, the cost of
// starting the process at all. DESK_BENCH_BIN=/path/to/desk measures
// another build the same way.
package startup

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	bin       string
)

// desk is the binary under test: DESK_BENCH_BIN when set (to compare
// builds side by side), else this tree's, built once.
func desk(b *testing.B) string {
	if p := os.Getenv("DESK_BENCH_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "desk-bench-startup-")
		if err != nil {
			return
		}
		bin = filepath.Join(dir, "desk")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/desk-runtime/desk/cmd/desk")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if cmd.Run() != nil {
			bin = ""
		}
	})
	if bin == "" {
		b.Fatal("building desk failed")
	}
	return bin
}

func freePort(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// BenchmarkStartToHealthz reports ms from exec to the first 200 from
// /healthz.
func BenchmarkStartToHealthz(b *testing.B) {
	d := desk(b)
	c := &http.Client{Timeout: time.Second}
	var total time.Duration
	for b.Loop() {
		home := b.TempDir()
		addr := freePort(b)
		cmd := exec.Command(d, "serve", "--addr", addr)
		cmd.Env = append(os.Environ(), "DESK_HOME="+home)
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		for {
			r, err := c.Get(fmt.Sprintf("http://%s/healthz", addr))
			if err == nil {
				r.Body.Close()
				if r.StatusCode == 200 {
					break
				}
			}
			if time.Since(start) > 30*time.Second {
				cmd.Process.Kill()
				b.Fatal("desk did not answer /healthz in 30 s")
			}
			time.Sleep(time.Millisecond)
		}
		total += time.Since(start)
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-healthz")
}

// BenchmarkProcessStart is the reference: exec of the same binary to its
// exit, doing nothing (desk version).
func BenchmarkProcessStart(b *testing.B) {
	d := desk(b)
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		if out, err := exec.Command(d, "version").CombinedOutput(); err != nil {
			b.Fatalf("desk version: %v\n%s", err, out)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms")
}
