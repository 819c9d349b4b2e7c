// Package adapter holds what the metric adapters (retryprom, retryotel)
// share: the bounded table of operation names, so that an unexpected name
// cannot create series without end, and the label values and buckets.
package adapter

import (
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Label values used in place of a call's own name.
const (
	// Other labels names past the limit, names that are not valid UTF-8,
	// and the name "other" itself.
	Other = "other"
	// Unnamed labels calls without a name.
	Unnamed = "unnamed"
)

// Table maps operation names to per-operation values, such as a set of
// metric series. The first Max distinct names get a value of their own,
// made by NewTable with the name (or Unnamed for ""); the rest share the value
// of Other. A Table is safe for concurrent use. Get reads a copy-on-write
// map with one atomic load and takes a lock only for a name it has not
// seen while the limit allows more.
type Table[T any] struct {
	max  int
	make func(label string) T

	names atomic.Pointer[map[string]T]
	other atomic.Pointer[T] // made at the first name that needs it
	mu    sync.Mutex        // serializes writers of names and other
}

// NewTable returns a Table of at most max names (max >= 1) whose values are
// made by mk. mk is called under the Table's lock, at most once per name
// and once for Other; it must not call back into the Table.
func NewTable[T any](max int, mk func(label string) T) *Table[T] {
	t := &Table[T]{max: max, make: mk}
	empty := map[string]T{}
	t.names.Store(&empty)
	return t
}

// Get returns the value for name.
func (t *Table[T]) Get(name string) T {
	names := *t.names.Load()
	if v, ok := names[name]; ok {
		return v
	}
	if len(names) >= t.max {
		if v := t.other.Load(); v != nil {
			return *v
		}
	}
	return t.add(name)
}

// add is Get's slow path, for a name not seen yet.
func (t *Table[T]) add(name string) T {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := *t.names.Load()
	if v, ok := names[name]; ok {
		return v
	}
	if len(names) >= t.max {
		return t.otherLocked()
	}
	var v T
	switch {
	case name == "":
		v = t.make(Unnamed)
	case name == Other || !utf8.ValidString(name):
		v = t.otherLocked()
	default:
		v = t.make(name)
	}
	next := make(map[string]T, len(names)+1)
	for k, old := range names {
		next[k] = old
	}
	next[name] = v
	t.names.Store(&next)
	return v
}

// otherLocked returns the value of Other, making it the first time. t.mu
// must be held.
func (t *Table[T]) otherLocked() T {
	if v := t.other.Load(); v != nil {
		return *v
	}
	v := t.make(Other)
	t.other.Store(&v)
	return v
}
