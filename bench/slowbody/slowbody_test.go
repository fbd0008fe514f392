// Package slowbody measures how desk answers while it is attacked with slow
// requests from one address (issue 23):
//
//	go test -run '^$' -bench . -benchtime 200x ./bench/slowbody
//
// A real desk (app.Serve: the per-address connection cap, the header
// timeout, the body deadlines) is attacked from 127.0.0.1 by 300
// connections at a time, each reconnecting as soon as it ends, while
// /healthz is asked b.N times from 127.0.0.2 on a fresh connection each.
// It reports the probe's latency (p50, p99, max) for two attacks — bodies
// (an unauthenticated POST declaring 1,000,000 or 200 bytes, then a byte a
// second) and heads (a request head sent a byte a second) — under the
// default cap (64) and a cap of 1000.
package slowbody

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk/app"
)

const attackers = 300

func BenchmarkHealthzUnderAttack(b *testing.B) {
	for _, attack := range []string{"bodies", "heads"} {
		for _, limit := range []int{0, 1000} {
			b.Run(fmt.Sprintf("%s/cap=%d", attack, limit), func(b *testing.B) {
				addr := serve(b, app.Config{Home: b.TempDir(), MaxConnsPerAddr: limit, Logger: slog.New(slog.DiscardHandler)})
				ctx, stop := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				var started, answered atomic.Int64
				for i := range attackers {
					wg.Go(func() {
						for ctx.Err() == nil {
							started.Add(1)
							if attackOnce(ctx, addr, attack, i) {
								answered.Add(1)
							}
							// The attack is slow, not a flood of requests:
							// a connection ended, the next one comes a
							// second later.
							select {
							case <-ctx.Done():
							case <-time.After(time.Second):
							}
						}
					})
				}
				probe := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true,
					DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
				for started.Load() < attackers {
					time.Sleep(10 * time.Millisecond) // until every attacker has dialed
				}
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					t0 := time.Now()
					resp, err := probe.Get("http://" + addr + "/healthz")
					if err != nil {
						b.Fatalf("/healthz under attack: %v", err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("/healthz under attack = %d", resp.StatusCode)
					}
					lat = append(lat, time.Since(t0))
				}
				b.StopTimer()
				stop()
				wg.Wait()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
				b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
				b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
				b.ReportMetric(float64(started.Load()), "attack-conns")
				b.ReportMetric(float64(answered.Load()), "answered-401")
			})
		}
	}
}

// serve runs desk as desk serve does and returns its address.
func serve(b *testing.B, cfg app.Config) string {
	a, err := app.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, "127.0.0.1:0", 5*time.Second, func(ad net.Addr) { addrc <- ad.String() }) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("serve: %v", err)
		}
		_ = a.Close(context.Background())
	})
	select {
	case ad := <-addrc:
		return ad
	case err := <-done:
		b.Fatal(err)
	}
	return ""
}

// attackOnce runs one slow connection from 127.0.0.1 until desk ends it or
// ctx ends, and reports whether desk answered 401.
func attackOnce(ctx context.Context, addr, attack string, i int) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	length := 1000000
	if i%2 == 1 {
		length = 200
	}
	head := fmt.Sprintf("POST /v1/workspaces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", length)
	if attack == "bodies" {
		if _, err := io.WriteString(c, head); err != nil {
			return false
		}
		head = ""
	}
	// A byte a second: the rest of the head, or body bytes.
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ended:
				return
			case <-tick.C:
			}
			b := []byte("x")
			if n < len(head) {
				b = []byte{head[n]}
			}
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	return err == nil && resp.StatusCode == 401
}
