package retry

import (
	"context"
	"time"

	"github.com/steadfast-go/retry/internal/clocks"
)

// The Retrier's clock: every reading of time and every timer of a call
// goes through here, on the real clock or the one WithClock gave. The
// timers are internal/clocks'; the readings stay methods of config, as
// their arguments (a clock and a time.Time) put a parked observed call
// at 4 KB of stack from another package.

// clockReading is the call's clock as a span from a fixed point, for measuring
// spans in 8 bytes where a time.Time takes 24, and for a tenth of the
// instructions of time.Time's Add and Before: from clocks.Epoch on the real
// clock (its monotonic reading only), from the clock's time when the
// Retrier was built (config.clockBase) on another.
func (cfg *config) clockReading() time.Duration {
	if cfg.clock == nil {
		return time.Since(clocks.Epoch)
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
func armWait(cfg *config, t *clocks.Timer, d time.Duration) <-chan time.Time {
	if d <= 0 && cfg.waitArmed == nil {
		return nil // inlined: a zero wait without a hook costs no call
	}
	return armTimer(cfg, t, d)
}

// armTimer is armWait's part for a non-zero wait or a hook, on t; the
// waits of sleepDetached take it too.
func armTimer(cfg *config, t *clocks.Timer, d time.Duration) <-chan time.Time {
	if d <= 0 {
		cfg.waitArmed(0)
		return nil
	}
	ch := t.Arm(cfg.clock, d)
	if cfg.waitArmed != nil {
		cfg.waitArmed(d)
	}
	return ch
}

// sleepDetached waits d on the Retrier's clock whatever the caller's
// context says: the outcome must be recorded even if the caller left.
func sleepDetached(cfg *config, t *clocks.Timer, d time.Duration) {
	if ch := armTimer(cfg, t, d); ch != nil {
		<-ch
	}
}

// afterFunc calls f after d on the Retrier's clock, on its own goroutine.
func (cfg *config) afterFunc(d time.Duration, f func()) clocks.FuncTimer {
	return clocks.AfterFunc(cfg.clock, d, f)
}
