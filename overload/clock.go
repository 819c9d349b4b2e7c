package overload

import (
	"time"

	"github.com/benbjohnson/clock"
)

// readings reads a clock as nanoseconds since it was made: on the real
// clock the monotonic clock alone, which costs half of time.Now.
type readings struct {
	clk  clock.Clock // nil: the real clock
	base time.Time
}

// The base is a nanosecond before the clock's time when made, so that a
// reading is never 0, which means "never".
func newReadings(clk clock.Clock) readings {
	if clk == nil {
		return readings{base: time.Now().Add(-1)}
	}
	return readings{clk: clk, base: clk.Now().Add(-1)}
}

// now is the time since base.
func (r *readings) now() int64 {
	if r.clk == nil {
		return int64(time.Since(r.base))
	}
	return int64(r.clk.Now().Sub(r.base))
}

// at is a reading as a time.
func (r *readings) at(n int64) time.Time { return r.base.Add(time.Duration(n)) }

// of is t as a reading, at least 1.
func (r *readings) of(t time.Time) int64 { return max(int64(t.Sub(r.base)), 1) }
