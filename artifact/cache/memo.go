package cache

import (
	"errors"
	"sync"
)

var errPanicked = errors.New("cache: computation panicked")

// Memo is an in-memory map from Key to a value computed at most once at a
// time per key, e.g. a module loaded into the driver. The zero value is
// ready to use; it is safe for concurrent use.
type Memo[V any] struct {
	mu sync.Mutex
	m  map[Key]*memoEntry[V]
}

type memoEntry[V any] struct {
	done chan struct{} // closed when v and err are set
	v    V
	err  error
}

// Do returns the value for key, calling f to compute it if absent.
// Concurrent callers for the same key wait for one f. Errors are not
// remembered: the next call tries again.
func (m *Memo[V]) Do(key Key, f func() (V, error)) (V, error) {
	m.mu.Lock()
	if m.m == nil {
		m.m = map[Key]*memoEntry[V]{}
	}
	if e, ok := m.m[key]; ok {
		m.mu.Unlock()
		<-e.done
		return e.v, e.err
	}
	e := &memoEntry[V]{done: make(chan struct{})}
	m.m[key] = e
	m.mu.Unlock()

	finished := false
	defer func() {
		if !finished { // f panicked: release waiters, then keep panicking
			e.err = errPanicked
		}
		if e.err != nil {
			m.mu.Lock()
			delete(m.m, key)
			m.mu.Unlock()
		}
		close(e.done)
	}()
	e.v, e.err = f()
	finished = true
	return e.v, e.err
}

// Get returns the value for key if it has been computed successfully.
func (m *Memo[V]) Get(key Key) (V, bool) {
	m.mu.Lock()
	e, ok := m.m[key]
	m.mu.Unlock()
	if ok {
		select {
		case <-e.done:
			if e.err == nil {
				return e.v, true
			}
		default: // still being computed
		}
	}
	var zero V
	return zero, false
}

// Delete forgets key.
func (m *Memo[V]) Delete(key Key) {
	m.mu.Lock()
	delete(m.m, key)
	m.mu.Unlock()
}

// Range calls f for each computed value until f returns false, e.g. to
// unload every module at exit.
func (m *Memo[V]) Range(f func(Key, V) bool) {
	m.mu.Lock()
	type kv struct {
		k Key
		e *memoEntry[V]
	}
	var all []kv
	for k, e := range m.m {
		all = append(all, kv{k, e})
	}
	m.mu.Unlock()
	for _, x := range all {
		select {
		case <-x.e.done:
			if x.e.err == nil && !f(x.k, x.e.v) {
				return
			}
		default:
		}
	}
}
