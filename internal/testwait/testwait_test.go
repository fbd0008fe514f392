package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	Until(t, 10*time.Second, func() bool { return n.Add(1) >= 3 }, "three calls")
	if got := n.Load(); got != 3 {
		t.Fatalf("cond called %d times, want 3", got)
	}
}

func TestPollGivesUpAtTheTimeout(t *testing.T) {
	t.Parallel()
	start := time.Now()
	if Poll(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if el := time.Since(start); el < 50*time.Millisecond || el > 5*time.Second {
		t.Fatalf("Poll gave up after %v, want about 50ms", el)
	}
}

func TestNeverWatchesTheWholeWindow(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var n atomic.Int32
	Never(t, 100*time.Millisecond, func() bool { n.Add(1); return false }, "nothing")
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Fatalf("Never returned after %v, before its window ended", el)
	}
	if n.Load() < 2 {
		t.Fatalf("cond checked %d times in the window, want several", n.Load())
	}
}
