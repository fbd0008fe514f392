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
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/desk-runtime/desk/bench/internal/deskbin"
)

// BenchmarkStartToHealthz reports ms from exec to the first 200 from
// /healthz.
func BenchmarkStartToHealthz(b *testing.B) {
	d := deskbin.Path(b)
	c := &http.Client{Timeout: time.Second}
	var total time.Duration
	for b.Loop() {
		home := b.TempDir()
		addr := deskbin.FreeAddr(b)
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
	d := deskbin.Path(b)
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
