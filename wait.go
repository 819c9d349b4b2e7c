package retry

import "time"

// Wait returns the wait Do takes after attempt failed with err, before
// the next attempt, for schedulers that run the attempts themselves (a
// job queue's retry policy, say), so that they back off exactly as Do
// does: the same formula for the same attempt. server reports that the
// wait is a server's delay from an [After] marker in err's chain, capped
// as Do caps it ([WithMaxDelay], or 30s without it), rather than the
// schedule's: the [Backoff]'s delay for attempt (counting from 1) and
// prev (the wait before that attempt, 0 after the first), randomized by
// the [Jitter] and capped by WithMaxDelay. err may be nil: the schedule's
// wait.
//
// Wait is pure in the manner of x/time/rate's ReserveN(t): it depends on
// its arguments and the Retrier's settings only, and changes nothing.
// rnd supplies the uniform samples in [0, 1) that Do would draw from the
// Retrier's random source: Wait calls it only where Do would, in the same
// order, at most twice (for a randomized Backoff, then for the Jitter; the
// library's schedules draw one sample at most). With nil it draws them
// from the Retrier's source, as Do does. (The sample Do draws from the
// source of [WithRandom] is float64(src.Uint64()>>11) / (1<<53).)
//
// Wait does not decide whether Do would retry err at all (a [Permanent]
// error, the attempts, the time budget and the context's deadline are
// Do's to judge), nor does it ask a budget or breaker. A nil r is the zero
// Retrier.
func (r *Retrier) Wait(attempt int, prev time.Duration, err error, rnd func() float64) (d time.Duration, server bool) {
	cfg := &zeroConfig
	if r != nil {
		cfg = r.config()
	}
	m := classify(err)
	return cfg.wait(attempt, prev, m.hint, m.hinted, rnd), m.hinted
}
