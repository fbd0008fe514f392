package keyedmutex

import (
	"runtime"
	"sync"
	"testing"
)

// TestSerializesOneKey runs many goroutines that each do a non-atomic
// read-modify-write of a per-key counter under Lock: if two holders of the
// same key ever overlapped, the race detector reports it and updates are
// lost. Afterwards every entry has been dropped.
func TestSerializesOneKey(t *testing.T) {
	t.Parallel()
	var k Map
	keys := []string{"a", "b", "c"}
	counts := map[string]*int{}
	for _, key := range keys {
		counts[key] = new(int)
	}
	const perKey = 200
	var wg sync.WaitGroup
	for _, key := range keys {
		for range perKey {
			wg.Go(func() {
				unlock := k.Lock(key)
				*counts[key]++
				unlock()
			})
		}
	}
	wg.Wait()
	for _, key := range keys {
		if got := *counts[key]; got != perKey {
			t.Errorf("key %q: %d increments, want %d", key, got, perKey)
		}
	}
	if n := k.len(); n != 0 {
		t.Errorf("%d entries left after every holder unlocked, want 0", n)
	}
}

// TestKeysAreIndependent holds one key and shows another can still be
// taken: unrelated keys do not wait for each other.
func TestKeysAreIndependent(t *testing.T) {
	t.Parallel()
	var k Map
	unlockA := k.Lock("a")
	done := make(chan struct{})
	go func() {
		k.Lock("b")()
		close(done)
	}()
	<-done // would hang (and time the test out) if "b" waited for "a"
	unlockA()
	if n := k.len(); n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
}

// TestSameKeyWaits shows a second Lock of a held key blocks until the first
// holder unlocks, and that the entry survives while someone waits.
func TestSameKeyWaits(t *testing.T) {
	t.Parallel()
	var k Map
	unlock := k.Lock("a")
	got := make(chan struct{})
	go func() {
		u := k.Lock("a")
		close(got)
		u()
	}()
	// Wait until the second caller has registered as a waiter (refs 2)
	// before checking that it has not got the lock.
	for {
		k.mu.Lock()
		refs := k.m["a"].refs
		k.mu.Unlock()
		if refs == 2 {
			break
		}
		runtime.Gosched()
	}
	select {
	case <-got:
		t.Fatal("a second holder got a key that was still held")
	default:
	}
	unlock()
	<-got
	if n := k.len(); n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
}
