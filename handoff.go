package retry

import (
	"context"
	"time"
)

// HandedOff is the Cause of the [*Error] of a call that ended with
// [OutcomeHandedOff]: its remaining attempts were given to a [HandOff],
// such as a job queue, which runs them later. The work has not failed;
// errors.As finds it in the call's error.
type HandedOff struct {
	// ID is what the HandOff returned: the ID of the job that holds the
	// call's remaining attempts.
	ID string
}

// Error says the remaining attempts were handed off, naming the job.
func (h *HandedOff) Error() string { return "retry: handed off as " + h.ID }

// Waiting is what a [HandOff] is given of a call about to wait: enough to
// run the remaining attempts elsewhere, later.
type Waiting struct {
	// Name is the call's [WithName].
	Name string
	// Attempts is how many attempts the call made; the next is
	// Attempts+1.
	Attempts int
	// Wait is the wait before the next attempt.
	Wait time.Duration
	// Due is when the next attempt is due: now plus Wait, on the
	// Retrier's clock ([WithClock]).
	Due time.Time
	// Err is the last attempt's error.
	Err error
	// Payload is the call's [WithPayload], not copied: copy it if it is
	// kept after HandOff returns.
	Payload []byte
	// IdempotencyKey is the call's key with [WithIdempotency], "" without.
	// The call releases its claim when it ends handed off, so that the
	// attempts that follow under the key run the work at most once.
	IdempotencyKey string
}

// HandOff takes the remaining attempts of a call whose next wait is long,
// or whose process is stopping, so that nothing waits in memory: see
// [WithHandOff]. retryriver.NewHandOff enqueues them as a River job.
// Implementations must be safe for concurrent use.
type HandOff interface {
	// HandOff stores w durably, to be resumed at w.Due, and returns an ID
	// for it (a job's ID), which must not be empty. ctx is the call's,
	// bounded by HandOffOptions.Timeout: it may carry a transaction to
	// enqueue in, and HandOff must return when it ends (one that does not
	// holds the call until it returns). An error, or an empty ID, leaves
	// the call to wait in memory.
	HandOff(ctx context.Context, w Waiting) (id string, err error)
}
