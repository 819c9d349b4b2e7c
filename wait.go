package retry

import "time"

// Wait returns the wait Do would take after attempt (from 1) failed with
// err (which may be nil), for schedulers that run attempts themselves.
// server reports a server's delay from an [After] marker in err, capped as
// Do caps it ([WithMaxDelay], else 30s); otherwise d is the [Backoff]'s
// delay for attempt and prev (the wait before it, 0 after the first),
// randomized by the [Jitter] and capped by WithMaxDelay. A nil r is the
// zero Retrier. Wait is pure: it changes nothing, and does not judge
// whether Do would retry, nor ask a budget or breaker. rnd gives the
// samples in [0, 1) Do would draw, at most two, in order (a randomized
// Backoff's, then the Jitter's); nil draws from r's source, as
// float64(src.Uint64()>>11) / (1<<53) for [WithRandom]'s src.
func (r *Retrier) Wait(attempt int, prev time.Duration, err error, rnd func() float64) (d time.Duration, server bool) {
	cfg := &zeroConfig
	if r != nil {
		cfg = r.config()
	}
	m := classify(err)
	return cfg.wait(attempt, prev, m.hint, m.hinted, rnd), m.hinted
}
