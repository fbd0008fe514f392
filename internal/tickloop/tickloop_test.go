package tickloop

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestLoop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var l Loop
		var n atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		l.Start(ctx, time.Second, func(context.Context) { n.Add(1) })
		l.Start(ctx, time.Second, func(context.Context) { n.Add(100) }) // ignored
		synctest.Wait()
		if n.Load() != 1 {
			t.Fatalf("ticks at start: %d", n.Load())
		}
		cancel() // the caller's context does not end the loop
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if n.Load() != 3 {
			t.Fatalf("ticks after 2.5 s: %d", n.Load())
		}
		if err := l.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := l.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n.Load() != 3 {
			t.Fatalf("ticks after Stop: %d", n.Load())
		}
		var never Loop
		never.Stop(context.Background())
		never.Start(context.Background(), time.Second, func(context.Context) { n.Add(1) })
		synctest.Wait()
		if n.Load() != 3 {
			t.Fatal("a loop started after Stop ran")
		}
	})
}
