package main

import (
	"net/http"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/overload"
)

// The retry policy of a user-facing notification: a few attempts within
// seconds, since a late "your order has shipped" is worth little, and an
// answer or nothing within the job's deadline.
const (
	maxAttempts    = 4                      // one send and three retries: the service sees at most 4x the load
	initialWait    = 250 * time.Millisecond // Exponential(250ms, 2, 2s) with full jitter: at most 250ms, 500ms, 1s
	maxBackoff     = 2 * time.Second
	maxWait        = 5 * time.Second // WithMaxDelay: caps the service's Retry-After too
	attemptTimeout = 2 * time.Second // an answer later than this is a timeout
	// defaultDeadline is at least 1.5x the longest schedule: 3 waits at
	// the 5s cap and 4 attempts that time out, 23s. A shorter deadline
	// does not hang a job: Do returns at once, with OutcomeDeadline, when
	// the next wait would end at or after it.
	defaultDeadline = 35 * time.Second
)

// pauseSpread is the pause's Spread: the least (the timeline lets the
// held jobs go together at its end, see vclock.go), which the service's
// burst, a second's worth of its rate, takes in one go.
const pauseSpread = time.Millisecond

// defaultServiceRate is the push service's rate, per second of virtual
// time (-service-rate): below what 8 workers send, about 90 a second,
// above what 4 do.
const defaultServiceRate = 15

// permanentStatuses are the statuses that will fail the same way every
// time: an empty message (400), an unknown user (404). The Transport does
// not retry them and ends those calls as permanent failures (counted,
// logged at Warn, dead-lettered). Timeouts, refused connections and the
// Transport's default statuses (408, 429, 5xx) are retried; every other
// status is a success.
var permanentStatuses = []int{http.StatusBadRequest, http.StatusNotFound}

// deps are what the policy is joined to.
type deps struct {
	store     idempotency.Store
	sink      retry.DeadLetterSink // nil: no dead letters (the -resend mode, under deadletters redrive)
	observers []retry.Observer
	budget    overload.Budget // nil: the push service's token bucket (see newRetrier)
	noBudget  bool            // no budget at all
	limit     overload.Limit  // nil: no concurrency limit (-limit sets one)
	pause     *overload.Pause // nil: no pause (-pause=false)
	// atLeastOnce lets a later call run a job whose outcome is unknown
	// again, once its claim's lease has run out (IdempotencyOptions).
	atLeastOnce bool
}

// newRetrier builds the one Retrier every job shares: the whole policy is
// here, so that a new option is one line in opts.
func newRetrier(d deps) (*retry.Retrier, error) {
	if d.budget == nil && !d.noBudget {
		b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 1000, TokenRatio: 0.5})
		if err != nil {
			return nil, err
		}
		d.budget = b
	}
	opts := []retry.Option{
		retry.WithMaxAttempts(maxAttempts),
		retry.WithBackoff(retry.Exponential(initialWait, 2, maxBackoff)),
		retry.WithJitter(retry.FullJitter),
		retry.WithMaxDelay(maxWait),
		retry.WithAttemptTimeout(attemptTimeout),
		// The send log: one key per job ID, claimed before the first
		// attempt, completed when the service has the notification. A
		// call cut while its request was out ends unknown: by default
		// that is stored and replayed (at most once); with AtLeastOnce
		// a redelivery after the lease sends again, and the push service
		// must deduplicate by the Idempotency-Key header.
		retry.WithIdempotency(d.store, &retry.IdempotencyOptions{AtLeastOnce: d.atLeastOnce}),
		// The retry budget of the push service, shared by every job
		// (Retrier.With keeps it): retries are allowed while failures
		// do not outpace half the successes, so an outage of the service
		// gets little more than first attempts, and a 30 % failure rate
		// (the default -fail-rate) never closes it.
		//
		// With -limit, a concurrency limit too, shared the same way:
		// every attempt takes a permit before its request goes out and
		// gives it back when the answer (or the timeout) is in, and the
		// limit learns from how the attempts ended (see run's note).
		//
		// And the push service's pause (-pause, the default), shared the
		// same way: a 429's Retry-After holds every job's next attempt,
		// first attempts too, until then, instead of the job that got it
		// alone waiting while the others go on into the same 429.
		retry.WithOverload(&retry.OverloadOptions{Budget: d.budget, NoBudget: d.noBudget, Limit: d.limit, Pause: d.pause}),
	}
	if d.sink != nil {
		// Every job that gives up (permanent or exhausted) is kept with
		// its ID (in the idempotency key), type (the name), attempts,
		// last error and times.
		opts = append(opts, retry.WithDeadLetter(d.sink, nil))
	}
	for _, o := range d.observers {
		opts = append(opts, retry.WithObserver(o))
	}
	return retry.New(opts...)
}
