package retry

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Outcome says how a call of Do ended. The zero value is [OutcomeSuccess].
type Outcome uint8

// The outcomes of a call. Every call ends in exactly one of them.
const (
	// OutcomeSuccess means an attempt returned nil, or an earlier
	// success was replayed by [WithIdempotency].
	OutcomeSuccess Outcome = iota
	// OutcomePermanent means an attempt's error was not retryable: marked
	// [Permanent], refused by [WithRetryIf], or context.Canceled from a
	// context other than Do's own. With [WithIdempotency] it also ends a
	// call that the store refused or failed (see [Error.Last]).
	OutcomePermanent
	// OutcomeExhausted means the last attempt allowed by
	// [WithMaxAttempts] failed.
	OutcomeExhausted
	// OutcomeMaxElapsed means the next wait would have ended at or after
	// the end of the [WithMaxElapsed] budget.
	OutcomeMaxElapsed
	// OutcomeDeadline means the context's deadline passed, or the next
	// wait would have ended at or after it.
	OutcomeDeadline
	// OutcomeCanceled means the context was canceled.
	OutcomeCanceled
	// OutcomeRefused means an [overload.Budget] refused the next retry, or
	// an [overload.Breaker] or an [overload.Limit] the next attempt: Do
	// stopped without calling fn.
	OutcomeRefused
	// OutcomeUnknown means the call's context ended while an attempt ran
	// (or fn returned an error after the deadline), or an idempotent
	// attempt lost its claim's renewal: fn may or may not have acted. The
	// error matches [ErrOutcomeUnknown] and the context's cause.
	OutcomeUnknown
	// OutcomeHandedOff means the call's remaining attempts were given to
	// a [HandOff] ([WithHandOff]) instead of a long wait: the work has not
	// failed, it goes on elsewhere. The error's Cause is a [*HandedOff]
	// with the ID of the job.
	OutcomeHandedOff
)

// lastOutcome is the highest Outcome.
const lastOutcome = OutcomeHandedOff

// String returns the outcome's name in lower case, as used for metric
// labels: "success", "permanent", "exhausted", "max-elapsed", "deadline",
// "canceled", "refused", "unknown" or "handed-off"; "Outcome(N)" for a
// value that is none of these.
func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "success"
	case OutcomePermanent:
		return "permanent"
	case OutcomeExhausted:
		return "exhausted"
	case OutcomeMaxElapsed:
		return "max-elapsed"
	case OutcomeDeadline:
		return "deadline"
	case OutcomeCanceled:
		return "canceled"
	case OutcomeRefused:
		return "refused"
	case OutcomeUnknown:
		return "unknown"
	case OutcomeHandedOff:
		return "handed-off"
	default:
		return "Outcome(" + strconv.Itoa(int(o)) + ")"
	}
}

// MarshalText returns the outcome's name, so that JSON holds
// "exhausted" rather than a number. An outcome that is none of the
// package's is an error: its name could not be read back.
func (o Outcome) MarshalText() ([]byte, error) {
	if o > lastOutcome {
		return nil, fmt.Errorf("retry: invalid outcome %d", uint8(o))
	}
	return []byte(o.String()), nil
}

// UnmarshalText parses a name returned by String.
func (o *Outcome) UnmarshalText(b []byte) error {
	for c := OutcomeSuccess; c <= lastOutcome; c++ {
		if c.String() == string(b) {
			*o = c
			return nil
		}
	}
	return fmt.Errorf("retry: invalid outcome %q", b)
}

// Observer receives the events of every call made through a Retrier, for
// metrics, logs and traces; set one with [WithObserver]. Implementations
// must be safe for concurrent use, must not block, and must not keep ctx
// after the call; Do holds no lock while calling them. Events are values
// an Observer may keep. OnDone comes exactly once per call, but not for
// bad input; Observer events in the package doc gives the order.
//
// A metrics observer keeps its two gauges from the events alone, with no
// state per call, by this rule (retrystats, retryprom and retryotel
// follow it):
//
//   - calls in flight, from a call's first attempt to its end: +1 at
//     OnAttemptStart with Attempt == 1, -1 at OnDone with Attempts > 0 (a
//     call that ends before its first attempt is never in flight);
//   - waits in progress: +1 at OnRetry with Delay > 0, -1 at OnWaitEnd.
//
// Each call's -1 follows its +1, so neither gauge goes below 0, however
// the events of different calls interleave, and both are 0 once the calls
// have ended. A call's wait starts after its first attempt and ends before
// its next attempt or its end: it is in flight all the while.
//
// The attempts of a hedged call ([Retrier.Hedge]) overlap: a hedge's
// OnAttemptStart and OnAttemptEnd come from its own goroutine (the
// winner's OnAttemptEnd from the caller's, after idempotency's part), and
// a hedge that lost may end after OnDone. Only attempt 1 and OnDone move
// the calls gauge, so the rule holds.
type Observer interface {
	// OnAttemptStart is called just before each attempt.
	OnAttemptStart(ctx context.Context, e AttemptStart)
	// OnAttemptEnd is called as soon as the attempt returns.
	OnAttemptEnd(ctx context.Context, e AttemptEnd)
	// OnRetry is called when Do has decided to try again, before it
	// waits e.Delay (which may be 0: then no wait follows, and no
	// OnWaitEnd).
	OnRetry(ctx context.Context, e Scheduled)
	// OnWaitEnd is called once after each OnRetry with Delay > 0, when
	// that wait ends: its timer fired, or the call's context ended. The
	// next OnAttemptStart, or OnDone, follows it. Waits that OnRetry does
	// not announce (an idempotent call's, for another holder of its key)
	// have none.
	OnWaitEnd(ctx context.Context, e WaitEnd)
	// OnDone is called once per call, just before Do returns.
	OnDone(ctx context.Context, e Done)
}

// AttemptStart is passed to [Observer.OnAttemptStart] just before an
// attempt. With [WithIdempotency], an attempt may end without calling fn
// (the key is held by another caller, or the store failed).
type AttemptStart struct {
	Name    string        // the operation's name, from WithName
	Attempt int           // 1 for the first attempt
	Wait    time.Duration // the wait just taken before this attempt; 0 for the first and after a zero-delay retry
}

// AttemptEnd is passed to [Observer.OnAttemptEnd] as soon as an attempt
// returns.
type AttemptEnd struct {
	Name     string        // the operation's name, from WithName
	Attempt  int           // 1 for the first attempt
	Err      error         // the attempt's error, usually what fn returned; nil on success
	Duration time.Duration // how long the attempt ran, on the Retrier's clock
}

// Scheduled is passed to [Observer.OnRetry] when an attempt failed
// and Do is about to wait Delay before the next one.
type Scheduled struct {
	Name    string        // the operation's name, from WithName
	Attempt int           // the attempt that failed
	Delay   time.Duration // the wait before attempt Attempt+1; may be 0
	Err     error         // the failed attempt's error
}

// WaitEnd is passed to [Observer.OnWaitEnd] when a wait that OnRetry
// announced ends.
type WaitEnd struct {
	// Name is the operation's name, from WithName.
	Name string
	// Attempt is the attempt the wait follows, as in the Scheduled event
	// that announced it: the next attempt, if there is one, is
	// Attempt+1.
	Attempt int
	// Delay is the wait's length as OnRetry announced it, the Delay of
	// that Scheduled event; a cut wait may have been shorter, by how much
	// Delay does not say.
	Delay time.Duration
	// Cut is true when the wait ended because the call's context ended
	// (cancelled, or past its deadline) rather than by its timer, or as
	// the timer fired: no attempt follows, and OnDone comes next.
	Cut bool
}

// Done is passed to [Observer.OnDone] once per call, when Do returns.
type Done struct {
	Name     string        // the operation's name, from WithName
	Outcome  Outcome       // how the call ended
	Attempts int           // attempts made, the first included; 0 if the call ended before its first
	Elapsed  time.Duration // from Do's start to its return, on the Retrier's clock
	// DeadLettered is true when a sink stored the call's dead letter.
	DeadLettered bool
	// DeadLetterFailed is true when the call should have been
	// dead-lettered but no sink stored it; Err then matches
	// [ErrDeadLetterNotRecorded].
	DeadLetterFailed bool
	Err              error // what Do returns; nil on success
}

// observers fans events out to several Observers, in the order given.
type observers []Observer

func (os observers) OnAttemptStart(ctx context.Context, e AttemptStart) {
	for _, o := range os {
		o.OnAttemptStart(ctx, e)
	}
}

func (os observers) OnAttemptEnd(ctx context.Context, e AttemptEnd) {
	for _, o := range os {
		o.OnAttemptEnd(ctx, e)
	}
}

func (os observers) OnRetry(ctx context.Context, e Scheduled) {
	for _, o := range os {
		o.OnRetry(ctx, e)
	}
}

func (os observers) OnWaitEnd(ctx context.Context, e WaitEnd) {
	for _, o := range os {
		o.OnWaitEnd(ctx, e)
	}
}

func (os observers) OnDone(ctx context.Context, e Done) {
	for _, o := range os {
		o.OnDone(ctx, e)
	}
}
