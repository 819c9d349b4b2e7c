package retry

import "time"

// Wait returns the wait Do would take after attempt (from 1) failed with
// err (which may be nil), for schedulers that run attempts themselves;
// server reports that d is a server's delay, from an [After] marker. A nil
// r is the zero Retrier. Wait is pure: it does not judge whether Do would
// retry, nor ask a budget or breaker. Waits in the package doc says how d
// is computed from prev and the samples rnd gives.
func (r *Retrier) Wait(attempt int, prev time.Duration, err error, rnd func() float64) (d time.Duration, server bool) {
	cfg := r.config()
	m := classify(err)
	return cfg.waitAfter(attempt, prev, m.hint, m.hinted, rnd), m.hinted
}
