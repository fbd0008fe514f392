// Package keyedmutex is a set of mutexes named by string, so that work on one
// key (one file path, one actor's quota) serializes while work on unrelated
// keys runs in parallel.
package keyedmutex

import "sync"

// Map holds one mutex per key in use. Entries are created on demand and
// dropped when nobody holds or waits for them, so memory stays bounded by
// the keys in use rather than every key ever seen. The zero value is ready
// to use; a Map must not be copied after first use.
type Map struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	mu   sync.Mutex
	refs int // holders and waiters; the entry is dropped at zero
}

// Lock blocks until the caller holds key's mutex and returns the function
// that releases it. Call the returned function exactly once.
func (k *Map) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*entry{}
	}
	e := k.m[key]
	if e == nil {
		e = &entry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// len reports how many keys have an entry, for tests.
func (k *Map) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
