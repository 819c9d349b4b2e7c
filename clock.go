package retry

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
)

// The Retrier's clock: every reading of time and every timer of a call
// goes through here, on the real clock or the one WithClock gave.

// epoch anchors the real clock's readings in now. It is set once, at
// start-up.
var epoch = time.Now()

// now reads the call's clock to measure time spans: the results are for
// Sub with each other and nothing else. On the real clock it reads only
// the monotonic clock, which costs half of time.Now (observed calls read
// it twice); the wall reading it carries is epoch's moved on by the
// monotonic time, so timestamps for people come from wallNow.
func (cfg *config) now() time.Time {
	if cfg.clock == nil {
		return epoch.Add(time.Since(epoch))
	}
	return cfg.clock.Now()
}

// reading is the call's clock as a span from a fixed point, for measuring
// spans within a call in 8 bytes where a time.Time takes 24: from epoch on
// the real clock, from the clock's time when the Retrier was built
// (config.clockBase) on another.
func (cfg *config) reading() time.Duration {
	if cfg.clock == nil {
		return time.Since(epoch)
	}
	return cfg.clock.Now().Sub(cfg.clockBase)
}

// elapsed is the time since the call started, on its clock.
func (c *call) elapsed() time.Duration { return c.cfg.reading() - c.start }

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

// until is the time left before t, a deadline, on the call's clock.
func (cfg *config) until(t time.Time) time.Duration {
	if cfg.clock == nil {
		return time.Until(t) // monotonic when t has a monotonic reading
	}
	return t.Sub(cfg.clock.Now())
}

// sleep waits d on the call's timer and reports whether it ran to the end
// (false: the context was done first). A zero wait arms no timer, but
// still calls the clock's WaitArmed hook, so that a test advancing a mock
// clock once per wait sees every wait of any schedule.
func (c *call) sleep(d time.Duration) bool {
	ch := c.armWait(d)
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// armWait arms the call's timer for a wait of d and tells the clock's
// WaitArmed hook; it returns nil for a zero wait, which arms nothing. The
// loop selects on the channel itself (see engine.go).
func (c *call) armWait(d time.Duration) <-chan time.Time {
	if d <= 0 && c.cfg.waitArmed == nil {
		return nil // inlined: a zero wait without a hook costs no call
	}
	return armTimer(c.cfg, &c.timer, d)
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

// waitTimer is the one timer of a call, made at the first non-zero wait and
// reset for the later ones. Without an injected clock it is a plain
// time.Timer, which saves the clock package's wrapper allocation.
type waitTimer struct {
	real *time.Timer
	mock *clock.Timer
}

func (w *waitTimer) arm(clk clock.Clock, d time.Duration) <-chan time.Time {
	if clk == nil {
		if w.real == nil {
			w.real = time.NewTimer(d)
		} else {
			w.real.Reset(d) // Go 1.23 timers: no stale value can be left in C
		}
		return w.real.C
	}
	if w.mock == nil {
		w.mock = clk.Timer(d)
	} else {
		w.mock.Reset(d)
	}
	return w.mock.C
}

func (w *waitTimer) stop() {
	if w.real != nil {
		w.real.Stop()
	}
	if w.mock != nil {
		w.mock.Stop()
	}
}

// sleepDetached waits d on the Retrier's clock whatever the caller's
// context says: the outcome must be recorded even if the caller left.
func sleepDetached(cfg *config, t *waitTimer, d time.Duration) {
	if ch := armTimer(cfg, t, d); ch != nil {
		<-ch
	}
}
