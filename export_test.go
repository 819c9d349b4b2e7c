package retry

import "time"

// WithWaitArmed sets the wait-armed hook directly, for this package's tests
// on the real clock (under testing/synctest): users get the same hook from
// a clock with a WaitArmed method, such as retrytest.Clock.
func WithWaitArmed(f func(d time.Duration)) Option {
	return Option{set: setFunc, v: func(c config) config { c.testWaitArmed = f; return c }}
}
