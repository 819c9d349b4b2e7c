// Package clocks arms timers on the real clock, or on the benbjohnson/clock
// Clock a Retrier was given (nil: the real clock). Every timer of a call
// goes through it.
package clocks

import (
	"time"
	"unsafe"

	"github.com/benbjohnson/clock"
)

// Timer is a call's one wait timer, made at the first non-zero wait and
// reset for the later ones: a *time.Timer on the real clock (which saves
// the clock package's wrapper allocation), else clk's *clock.Timer. One
// word for either: a parked call's frame keeps it.
type Timer struct{ p unsafe.Pointer }

// Arm arms the timer on clk for d > 0 and returns its channel.
func (w *Timer) Arm(clk clock.Clock, d time.Duration) <-chan time.Time {
	if clk == nil {
		t := (*time.Timer)(w.p)
		if t == nil {
			t = time.NewTimer(d)
			w.p = unsafe.Pointer(t)
		} else {
			t.Reset(d) // Go 1.23 timers: no stale value can be left in C
		}
		return t.C
	}
	t := (*clock.Timer)(w.p)
	if t == nil {
		t = clk.Timer(d)
		w.p = unsafe.Pointer(t)
	} else {
		t.Reset(d)
	}
	return t.C
}

// Stop stops the timer, armed on clk.
func (w *Timer) Stop(clk clock.Clock) {
	switch {
	case w.p == nil:
	case clk == nil:
		(*time.Timer)(w.p).Stop()
	default:
		(*clock.Timer)(w.p).Stop()
	}
}

// FuncTimer calls a function on its own goroutine when it fires, on the
// real clock or another. The zero FuncTimer is not armed.
type FuncTimer struct {
	t  *time.Timer
	ct *clock.Timer
}

// AfterFunc calls f after d on clk.
func AfterFunc(clk clock.Clock, d time.Duration, f func()) FuncTimer {
	if clk == nil {
		return FuncTimer{t: time.AfterFunc(d, f)}
	}
	return FuncTimer{ct: clk.AfterFunc(d, f)}
}

// Reset arms the timer again for d.
func (h FuncTimer) Reset(d time.Duration) {
	if h.t != nil {
		h.t.Reset(d)
	} else {
		h.ct.Reset(d)
	}
}

// Stop stops the timer and reports whether it was stopped before it fired.
func (h FuncTimer) Stop() bool {
	switch {
	case h.t != nil:
		return h.t.Stop()
	case h.ct != nil:
		return h.ct.Stop()
	}
	return false
}
