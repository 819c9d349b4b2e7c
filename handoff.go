package retry

import (
	"context"
	"errors"
	"time"
)

// Defaults of HandOffOptions.
const (
	defaultHandOffThreshold = time.Minute     // the shortest wait handed off
	defaultHandOffTimeout   = 2 * time.Second // a database insert's bound, with room for a slow one
	minHandOffTimeout       = time.Millisecond
)

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
	// for it (a job's ID), which must not be empty. ctx is the call's,
	// bounded by HandOffOptions.Timeout: it may carry a transaction to
	// enqueue in, and HandOff must return when it ends. An error, or an
	// empty ID, leaves the call to wait in memory.
	HandOff(ctx context.Context, w Waiting) (id string, err error)
}

// HandOffOptions tunes [WithHandOff]. A nil *HandOffOptions gives the
// defaults.
type HandOffOptions struct {
	// Threshold is the shortest wait handed off; shorter ones are waited
	// in memory. It must not be negative. Default (0): 1 minute.
	Threshold time.Duration
	// Stopping, once done, hands off every wait whatever its length,
	// waits already under way included, which end at once: give it a
	// context that ends when the process begins to shut down (such as
	// signal.NotifyContext's), so that calls waiting to retry do not hold
	// it up nor lose their work. Default: nil, never.
	Stopping context.Context
	// Timeout bounds each call of HandOff; past it the call waits in
	// memory. It must be 0 (the default, 2s) or at least 1ms.
	Timeout time.Duration
}

// handOffConfig is WithHandOff's setting.
type handOffConfig struct {
	h         HandOff
	threshold time.Duration
	timeout   time.Duration
	stopping  context.Context // nil: never
}

// takes says whether a wait of d is handed off: it is long, or the
// process is stopping. A nil *handOffConfig takes none.
func (ho *handOffConfig) takes(d time.Duration) bool {
	return ho != nil && (d >= ho.threshold || ho.stopped())
}

// stopped says whether the process is stopping.
func (ho *handOffConfig) stopped() bool { return ho.stopping != nil && ho.stopping.Err() != nil }

// WithHandOff gives a call's remaining attempts to h instead of waiting,
// when the next wait is at least o.Threshold (default 1 minute) or
// o.Stopping is closed, even a wait that would end past the context's
// deadline: a call handed off returns at once, so its deadline need not
// cover the wait. The call then ends with an [*Error] of
// [OutcomeHandedOff] whose Cause is a [*HandedOff] holding the ID h
// returned, matching [ErrHandedOff]. Such a call has not failed: dead
// letters do not record it by default, and observers count it as its own
// outcome (Done, with no OnRetry for the wait it did not make). A budget's
// leave to retry is given back. If h fails, returns an empty ID or
// outlasts o.Timeout, the call waits in memory as it would have without
// the option, and observers hear the retry and the wait as for any other:
// nothing is lost (a wait past the deadline then ends the call with
// [OutcomeDeadline] at once). h is asked on the call's goroutine, before
// the wait, after a [Budget] or [Breaker] allowed it. The Retrier needs
// [WithName], by which a worker finds the work to resume; h must not be
// nil, nor o.Threshold negative. Default: none; a Retrier without it asks
// nothing and costs nothing more.
func WithHandOff(h HandOff, o *HandOffOptions) Option {
	if s, isNil := nilArg(h); isNil {
		return invalid("WithHandOff(%s, ...): the HandOff must not be nil", s)
	}
	c := &handOffConfig{h: h, threshold: defaultHandOffThreshold, timeout: defaultHandOffTimeout}
	if o != nil {
		switch {
		case o.Threshold < 0:
			return invalid("WithHandOff: HandOffOptions.Threshold is %v; it must not be negative (0 is the default, 1 minute)", o.Threshold)
		case o.Timeout < 0 || o.Timeout > 0 && o.Timeout < minHandOffTimeout:
			return invalid("WithHandOff: HandOffOptions.Timeout is %v; it must be 0 (the default, %v) or at least %v", o.Timeout, defaultHandOffTimeout, minHandOffTimeout)
		}
		c.threshold = or(o.Threshold, c.threshold)
		c.timeout = or(o.Timeout, c.timeout)
		c.stopping = o.Stopping
	}
	return Option{set: setHandOff, v: c}
}

// handingOff is the hook of WithHandOff: before a long wait, or any wait
// once the process is stopping, it gives the call's remaining attempts to
// the HandOff and ends the call; a wait in memory that the stop cuts
// short, it hands off then. It keeps no state: a parked call's frame has
// no room for it (see engine.go); a wait's is in the call's context.
type handingOff[T any] struct{ noHook[T] }

// stopWait is the context a call waits on in memory while HandOffOptions.Stopping
// may end the wait: the call's, ended early by Stopping.
type stopWait struct {
	context.Context
	call   context.Context // the call's own, given back when the wait ends
	cancel context.CancelFunc
	stop   func() bool   // unregisters cancel from Stopping
	ends   time.Duration // a clock reading: when the wait ends
}

// retrying hands off the wait of d if it should, and returns the call's
// error if the HandOff took it; nil (wait in memory) otherwise, its
// failure included, unless the wait would end past the deadline.
func (handingOff[T]) retrying(c *call, d time.Duration) error {
	ho := c.cfg.handOff
	if !ho.takes(d) {
		if ho.stopping != nil && d > 0 { // the loop waits on c.ctx: let Stopping end it
			w := &stopWait{call: c.ctx, ends: c.cfg.clockReading() + d}
			w.Context, w.cancel = context.WithCancel(c.ctx)
			w.stop = context.AfterFunc(ho.stopping, w.cancel)
			c.ctx = w
		}
		return nil
	}
	if err := handOffWait(c, d); err != nil {
		return err
	}
	if deadline, ok := c.ctx.Deadline(); ok && d >= c.cfg.clockUntil(deadline) {
		return c.stopFor(stopDeadline) // no wait in memory can be made
	}
	return nil
}

// waited gives the call its context back and hands off the rest of a
// wait in memory that the process's stop ended early; if the HandOff
// fails, it waits the rest here.
func (handingOff[T]) waited(c *call, _ time.Duration) error {
	w, ok := c.ctx.(*stopWait)
	if !ok {
		return nil
	}
	w.end(c)
	left := w.ends - c.cfg.clockReading()
	if c.ctx.Err() != nil || left <= 0 || !c.cfg.handOff.stopped() {
		return nil // the wait is over, or the call's context ended it
	}
	if err := handOffWait(c, left); err != nil {
		return err
	}
	c.sleepOrDone(left)
	return nil
}

// unwind gives the call its context back if a panic cut a wait short.
func (handingOff[T]) unwind(c *call, _ *attemptState) {
	if w, ok := c.ctx.(*stopWait); ok {
		w.end(c)
	}
}

// end gives c its own context back and releases the wait's.
func (w *stopWait) end(c *call) {
	c.ctx = w.call
	w.stop()
	w.cancel()
}

// handOffWait gives the call's remaining attempts, due after a wait of d,
// to the HandOff, and returns the call's error if it took them.
func handOffWait(c *call, d time.Duration) error {
	ho := c.cfg.handOff
	w := Waiting{Name: c.cfg.name, Attempts: c.attempts, Wait: d, Due: c.cfg.wallNow().Add(d),
		Err: c.last, Payload: c.cfg.payload}
	if c.cfg.features&featIdempotency != 0 {
		w.IdempotencyKey = c.cfg.idempotencyKey(c.ctx)
	}
	ctx, cancel := c.cfg.withTimeout(c.ctx, ho.timeout)
	id, err := ho.h.HandOff(ctx, w)
	cancel()
	if err != nil || id == "" {
		return nil
	}
	return c.errorOf(OutcomeHandedOff, &HandedOff{ID: id}, nil)
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
// must not be negative; attempts above 2³¹-1 count as that many, so that
// no count can overflow. Default: a call starts afresh.
func WithResume(attempts int, wait time.Duration) Option {
	switch {
	case attempts < 0:
		return invalid("WithResume(%d, %v): the attempts made must not be negative", attempts, wait)
	case wait < 0:
		return invalid("WithResume(%d, %v): the wait must not be negative", attempts, wait)
	}
	return Option{set: setResume, v: &resumeConfig{attempts: min(attempts, maxResumedAttempts), wait: wait}}
}

// maxResumedAttempts bounds WithResume's count: more than any call makes,
// and far enough from the largest int that counting on cannot overflow.
const maxResumedAttempts = 1<<31 - 1
