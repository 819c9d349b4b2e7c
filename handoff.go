package retry

import (
	"context"
	"errors"
	"time"
)

// defaultHandOffThreshold is the shortest wait handed off when
// HandOffOptions.Threshold is not given.
const defaultHandOffThreshold = time.Minute

// ErrHandedOff is matched (errors.Is) by the error of a call that ended
// with [OutcomeHandedOff]: its remaining attempts were given to a
// [HandOff], such as a job queue, which runs them later. The work has not
// failed; errors.As finds the [*HandedOff] with the ID of the job.
var ErrHandedOff = errors.New("retry: handed off")

// HandedOff is the Cause of the [*Error] of a call that ended with
// [OutcomeHandedOff]. It matches [ErrHandedOff].
type HandedOff struct {
	// ID is what the HandOff returned: the ID of the job that holds the
	// call's remaining attempts.
	ID string
}

// Error says the remaining attempts were handed off, naming the job.
func (h *HandedOff) Error() string { return "retry: handed off as " + h.ID }

// Is reports whether target is [ErrHandedOff].
func (h *HandedOff) Is(target error) bool { return target == ErrHandedOff }

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
	// for it (a job's ID). ctx is the call's: it may carry a transaction
	// to enqueue in. An error leaves the call to wait in memory.
	HandOff(ctx context.Context, w Waiting) (id string, err error)
}

// HandOffOptions tunes [WithHandOff]. A nil *HandOffOptions gives the
// defaults.
type HandOffOptions struct {
	// Threshold is the shortest wait handed off; shorter ones are waited
	// in memory. It must not be negative. Default (0): 1 minute.
	Threshold time.Duration
	// Stopping, once closed, hands off every wait whatever its length:
	// close it when the process begins to shut down, so that calls
	// waiting to retry do not hold it up nor lose their work. Default:
	// nil, never.
	Stopping <-chan struct{}
}

// handOffConfig is WithHandOff's setting.
type handOffConfig struct {
	h         HandOff
	threshold time.Duration
	stopping  <-chan struct{}
}

// WithHandOff gives a call's remaining attempts to h instead of waiting,
// when the next wait is at least o.Threshold (default 1 minute) or
// o.Stopping is closed: the call then ends at once with an [*Error] of
// [OutcomeHandedOff] whose Cause is a [*HandedOff] holding the ID h
// returned, matching [ErrHandedOff]. Such a call has not failed: dead
// letters do not record it by default, and observers count it as its own
// outcome (Done, with no OnRetry for the wait it did not make). A budget's
// leave to retry is given back. If h fails, the call waits in memory as it
// would have without the option, and observers hear the retry and the
// wait as for any other: nothing is lost. h is asked on the call's
// goroutine, before the wait, after a [Budget] or [Breaker] allowed it.
// h must not be nil, nor o.Threshold negative. Default: none; a Retrier
// without it asks nothing and costs nothing more.
func WithHandOff(h HandOff, o *HandOffOptions) Option {
	if s, isNil := nilArg(h); isNil {
		return invalid("WithHandOff(%s, ...): the HandOff must not be nil", s)
	}
	c := &handOffConfig{h: h, threshold: defaultHandOffThreshold}
	if o != nil {
		switch {
		case o.Threshold < 0:
			return invalid("WithHandOff: HandOffOptions.Threshold is %v; it must not be negative (0 is the default, 1 minute)", o.Threshold)
		case o.Threshold > 0:
			c.threshold = o.Threshold
		}
		c.stopping = o.Stopping
	}
	return Option{set: setHandOff, v: c}
}

// handingOff is the hook of WithHandOff: before a long wait, or any wait
// once the process is stopping, it gives the call's remaining attempts to
// the HandOff and ends the call.
type handingOff[T any] struct{ noHook[T] }

// retrying hands off the wait of d if it should, and returns the call's
// error if the HandOff took it; nil (wait in memory) otherwise, its
// failure included.
func (handingOff[T]) retrying(c *call, d time.Duration) error {
	ho := c.cfg.handOff
	if d < ho.threshold && !closed(ho.stopping) {
		return nil
	}
	w := Waiting{Name: c.cfg.name, Attempts: c.attempts, Wait: d, Due: c.cfg.wallNow().Add(d),
		Err: c.last, Payload: c.cfg.payload}
	if c.cfg.features&featIdempotency != 0 {
		w.IdempotencyKey = c.cfg.idempotencyKey(c.ctx)
	}
	id, err := ho.h.HandOff(c.ctx, w)
	if err != nil {
		return nil
	}
	return c.errorOf(OutcomeHandedOff, &HandedOff{ID: id}, nil)
}

// closed says whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// resumeConfig is WithResume's setting.
type resumeConfig struct {
	attempts int
	wait     time.Duration
}

// WithResume makes each call go on with the attempts of a call that was
// handed off ([WithHandOff]) after attempts attempts, before a wait of
// wait: a [Waiting]'s Attempts and Wait. The call's first attempt is
// attempt attempts+1 for observers, [WithMaxAttempts] counts the attempts
// already made, the [*Error] reports them all, and the schedule goes on
// from wait (as [Decorrelated] grows from the previous wait); a handed-off
// call hands off again with the total. The call makes at least one
// attempt, even if attempts already reaches WithMaxAttempts. The time
// budget of [WithMaxElapsed] counts from the resumed call's start. A
// worker that runs handed-off work derives a Retrier per job with it
// ([Retrier.With]), as retryriver's HandOffWorker does. attempts and wait
// must not be negative. Default: a call starts afresh.
func WithResume(attempts int, wait time.Duration) Option {
	switch {
	case attempts < 0:
		return invalid("WithResume(%d, %v): the attempts made must not be negative", attempts, wait)
	case wait < 0:
		return invalid("WithResume(%d, %v): the wait must not be negative", attempts, wait)
	}
	return Option{set: setResume, v: &resumeConfig{attempts: attempts, wait: wait}}
}
