package retry

import (
	"context"
	"time"
	"unsafe"

	"github.com/benbjohnson/clock"
)

// The Retrier's clock: every reading of time and every timer of a call
// goes through here, on the real clock or the one WithClock gave.

// monoEpoch anchors the real clock's readings in now. It is set once, at
// start-up.
var monoEpoch = time.Now()

// clockNow reads the call's clock to measure time spans: the results are for
// Sub with each other and nothing else. On the real clock it reads only
// the monotonic clock, which costs half of time.Now (observed calls read
// it twice); the wall reading it carries is monoEpoch's moved on by the
// monotonic time, so timestamps for people come from wallNow.
func (cfg *config) clockNow() time.Time {
	if cfg.clock == nil {
		return monoEpoch.Add(time.Since(monoEpoch))
	}
	return cfg.clock.Now()
}

// clockReading is the call's clock as a span from a fixed point, for measuring
// spans within a call in 8 bytes where a time.Time takes 24: from monoEpoch on
// the real clock, from the clock's time when the Retrier was built
// (config.clockBase) on another.
func (cfg *config) clockReading() time.Duration {
	if cfg.clock == nil {
		return time.Since(monoEpoch)
	}
	return cfg.clock.Now().Sub(cfg.clockBase)
}

// wallNow is the call's clock for timestamps that people read.
func (cfg *config) wallNow() time.Time {
	if cfg.clock == nil {
		return time.Now()
	}
	return cfg.clock.Now()
}

// withTimeout is context.WithTimeout on the call's clock.
func (cfg *config) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if cfg.clock == nil {
		return context.WithTimeout(parent, d)
	}
	return cfg.clock.WithTimeout(parent, d)
}

// clockUntil is the time left before t, a deadline, on the call's clock.
func (cfg *config) clockUntil(t time.Time) time.Duration {
	if cfg.clock == nil {
		return time.Until(t) // monotonic when t has a monotonic reading
	}
	return t.Sub(cfg.clock.Now())
}

// armWait arms a call's timer, t, for a wait of d and tells the clock's
// WaitArmed hook; it returns nil for a zero wait, which arms nothing. The
// loop selects on the channel itself (see engine.go).
func armWait(cfg *config, t *waitTimer, d time.Duration) <-chan time.Time {
	if d <= 0 && cfg.waitArmed == nil {
		return nil // inlined: a zero wait without a hook costs no call
	}
	return armTimer(cfg, t, d)
}

// armTimer is armWait's part for a non-zero wait or a hook, on t; the
// waits of sleepDetached take it too.
func armTimer(cfg *config, t *waitTimer, d time.Duration) <-chan time.Time {
	if d <= 0 {
		cfg.waitArmed(0)
		return nil
	}
	ch := t.arm(cfg.clock, d)
	if cfg.waitArmed != nil {
		cfg.waitArmed(d)
	}
	return ch
}

// waitTimer is the one timer of a call, made at the first non-zero wait
// and reset for the later ones: a *time.Timer without an injected clock
// (which saves the clock package's wrapper allocation), else the clock's
// *clock.Timer, as the Retrier's clock says. One word for either: a parked
// call's frame keeps it (see engine.go).
type waitTimer struct{ p unsafe.Pointer }

func (w *waitTimer) arm(clk clock.Clock, d time.Duration) <-chan time.Time {
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

// stop stops the timer, armed on clk.
func (w *waitTimer) stop(clk clock.Clock) {
	switch {
	case w.p == nil:
	case clk == nil:
		(*time.Timer)(w.p).Stop()
	default:
		(*clock.Timer)(w.p).Stop()
	}
}

// sleepDetached waits d on the Retrier's clock whatever the caller's
// context says: the outcome must be recorded even if the caller left.
func sleepDetached(cfg *config, t *waitTimer, d time.Duration) {
	if ch := armTimer(cfg, t, d); ch != nil {
		<-ch
	}
}

// hedgeTimer is a hedged attempt's timer, which starts the next hedge on
// its own goroutine: on the real clock or the Retrier's.
type hedgeTimer struct {
	t  *time.Timer
	ct *clock.Timer
}

func (cfg *config) afterFunc(d time.Duration, f func()) hedgeTimer {
	if cfg.clock == nil {
		return hedgeTimer{t: time.AfterFunc(d, f)}
	}
	return hedgeTimer{ct: cfg.clock.AfterFunc(d, f)}
}

func (h hedgeTimer) reset(d time.Duration) {
	if h.t != nil {
		h.t.Reset(d)
	} else {
		h.ct.Reset(d)
	}
}

func (h hedgeTimer) stop() {
	if h.t != nil {
		h.t.Stop()
	} else {
		h.ct.Stop()
	}
}
