package retrymetrics

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Operation labels used in place of a call's own name.
const (
	// Other ("other") labels the names past a [Table]'s limit, names that
	// are not valid UTF-8 or longer than [MaxNameLen], and the name
	// "other" itself.
	Other = "other"
	// Unnamed ("unnamed") labels calls without a name.
	Unnamed = "unnamed"
)

// MaxNameLen (128) is the longest operation name, in bytes, that a [Table]
// gives a value of its own; longer names get [Other]'s. It bounds a
// label's size: a longer name is most likely data (a URL, an ID) that
// could hold a secret, on every series, and could fail a whole scrape's
// label_value_length_limit.
const MaxNameLen = 128

// Table maps operation names to per-operation values, such as a set of
// metric series, so that an unexpected name cannot create series without
// end. The first distinct names up to its limit get a value of their own,
// made with the name (or [Unnamed] for ""); the rest share the value made
// for [Other], as do names that are not valid UTF-8, "other" itself, and
// names longer than [MaxNameLen] bytes. Every name counts toward the
// limit, "" included, but those longer than MaxNameLen, which the Table
// does not keep.
//
// A Table is safe for concurrent use. Build one with [NewTable]; the zero
// value is not usable.
type Table[T any] struct {
	max  int
	make func(label string) T

	names atomic.Pointer[map[string]T]
	other atomic.Pointer[T] // made at the first name that needs it
	mu    sync.Mutex        // serializes writers of names and other
}

// NewTable returns a Table whose limit is maxOperations names (the
// MaxOperations setting): [DefaultMaxOperations] when it is 0. newValue
// returns the value of a label; the Table calls it under its lock, at most
// once per name and once for Other, so it must not call back into the
// Table. A negative maxOperations or a nil newValue gives an error that names
// the problem; callers wrap it with their own sentinel (retryprom and
// retryotel use retry.ErrInvalidOption).
func NewTable[T any](maxOperations int, newValue func(label string) T) (*Table[T], error) {
	switch {
	case maxOperations < 0:
		return nil, fmt.Errorf("MaxOperations %d is negative", maxOperations)
	case maxOperations == 0:
		maxOperations = DefaultMaxOperations
	}
	if newValue == nil {
		return nil, errors.New("the function that makes a Table's values is nil")
	}
	t := &Table[T]{max: maxOperations, make: newValue}
	empty := map[string]T{}
	t.names.Store(&empty)
	return t, nil
}

// Get returns the value for name, making it the first time the Table
// sees the name.
func (t *Table[T]) Get(name string) T {
	if len(name) > MaxNameLen {
		return t.otherValue()
	}
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

// otherValue returns the value of Other, making it the first time.
func (t *Table[T]) otherValue() T {
	if v := t.other.Load(); v != nil {
		return *v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.otherLocked()
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
