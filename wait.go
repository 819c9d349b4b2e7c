package retry

import "time"

// Wait returns the wait Do would take after attempt (from 1) failed with
// err, for schedulers that run attempts themselves, such as a job queue.
// server reports a server's delay from an [After] marker in err, capped as
// Do caps it ([WithMaxDelay], else 30s); otherwise d is the [Backoff]'s
// delay for attempt and prev (the wait before it, 0 after the first),
// randomized by the [Jitter] and capped by WithMaxDelay. err may be nil. A
// nil r is the zero Retrier.
//
// Wait is pure, like x/time/rate's ReserveN(t): it depends on its
// arguments and r's settings and changes nothing. rnd supplies the uniform
// samples in [0, 1) Do would draw, called where Do would, in order, at most
// twice (a randomized Backoff, then the Jitter); nil draws from r's source
// (from [WithRandom]'s src, float64(src.Uint64()>>11) / (1<<53)). Wait
// does not judge whether Do would retry at all, nor ask a budget or breaker.
func (r *Retrier) Wait(attempt int, prev time.Duration, err error, rnd func() float64) (d time.Duration, server bool) {
	cfg := &zeroConfig
	if r != nil {
		cfg = r.config()
	}
	m := classify(err)
	return cfg.wait(attempt, prev, m.hint, m.hinted, rnd), m.hinted
}
