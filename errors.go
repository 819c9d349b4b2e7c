package retry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrExhausted is the cause of an [*Error] when Do stopped because it made
// every attempt that [WithMaxAttempts] allows, or because the time budget of
// [WithMaxElapsed] was spent (the [*Error]'s Outcome tells the two apart).
var ErrExhausted = errors.New("retry: attempts exhausted")

// ErrInvalidOption is wrapped by every error that reports bad input: an
// invalid option value, a nil fn, context or [*Retrier], or an empty or
// too long idempotency key. The wrapping error's message names the
// problem. When Do returns it, fn was not called.
var ErrInvalidOption = errors.New("retry: invalid option")

// ErrOutcomeUnknown is matched by the error of a call that ended with
// [OutcomeUnknown], and by its replay: fn was running when the context
// ended, or its idempotency claim could not be renewed, so the work may
// or may not have happened. [WithIdempotency] says what a later call with
// the key does.
var ErrOutcomeUnknown = errors.New("retry: outcome unknown")

// Error is the error Do returns whenever no attempt succeeded, whatever the
// reason, so callers can rely on errors.As and errors.Is alone. errors.Is
// matches the last attempt's error and the cause: [ErrExhausted],
// context.Canceled or context.DeadlineExceeded, a cause from
// context.WithCancelCause, and [ErrOutcomeUnknown] for [OutcomeUnknown].
type Error struct {
	// Outcome says why Do stopped. It is never OutcomeSuccess.
	Outcome Outcome
	// Attempts is how many attempts Do made, the first included. With
	// [WithIdempotency] an attempt that found the key held by another
	// caller counts although fn did not run. It is 0 when the call ended
	// before its first attempt: its context was done, or the idempotency
	// store ended it.
	Attempts int
	// Last is the error of the last attempt. A call that ended before any
	// attempt has the idempotency store's reason here, if any (an error
	// matching [ErrIdempotencyUnavailable], [ErrKeyReuse], [ErrReplayed]
	// or [ErrInProgress] when it ended waiting for another holder), and nil otherwise.
	// A [Permanent] marker is still in its chain.
	Last error
	// Cause is why Do stopped: ErrExhausted (attempts or time budget), the context's
	// cause (context.Cause), context.DeadlineExceeded when the next wait
	// would have passed the context's deadline, or the refusal of a
	// [overload.Budget] or [overload.Breaker] (OutcomeRefused). For OutcomeUnknown it is the
	// context's cause, or the failed renewal of the idempotency claim. For
	// OutcomeHandedOff it is a [*HandedOff], with the job's ID. It is nil
	// for OutcomePermanent, where Last says it all.
	Cause error

	// ctxErr is ctx.Err() when it differs from Cause, so that a custom
	// cancellation cause does not hide context.Canceled.
	ctxErr error
	// early is set when Do stopped before a wait that would have ended
	// past the context's deadline, while the context was still live.
	early bool
}

// Error names the cause, the number of attempts and the last error, as in
// "retry: attempts exhausted after 3 attempts: connection refused". An
// error whose own Error method panics, as a typed nil pointer's may, is
// written as fmt writes it: "<nil>".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("retry: ")
	switch e.Outcome {
	case OutcomePermanent:
		b.WriteString("permanent error")
	case OutcomeExhausted:
		b.WriteString("attempts exhausted")
	case OutcomeMaxElapsed:
		b.WriteString("time budget spent")
	case OutcomeUnknown:
		b.WriteString("outcome unknown")
		if e.Cause != nil {
			b.WriteString(" (")
			b.WriteString(errorText(e.Cause))
			b.WriteString(")")
		}
	case OutcomeHandedOff:
		b.WriteString("remaining attempts handed off")
		if h, ok := e.Cause.(*HandedOff); ok {
			b.WriteString(" as ")
			b.WriteString(h.ID)
		}
	case OutcomeDeadline:
		if e.early {
			b.WriteString("next wait would end past the context deadline")
			break
		}
		fallthrough
	default:
		if e.Cause != nil {
			b.WriteString(errorText(e.Cause))
		} else {
			b.WriteString(e.Outcome.String())
		}
	}
	if e.Attempts == 0 {
		b.WriteString(" before the first attempt")
	} else {
		b.WriteString(" after ")
		b.WriteString(strconv.Itoa(e.Attempts))
		if e.Attempts == 1 {
			b.WriteString(" attempt")
		} else {
			b.WriteString(" attempts")
		}
	}
	if e.Last != nil {
		b.WriteString(": ")
		b.WriteString(errorText(e.Last))
	}
	return b.String()
}

// Is reports whether target is [ErrOutcomeUnknown] and e's Outcome is
// [OutcomeUnknown]; errors.Is looks at the chain of Unwrap for the rest.
func (e *Error) Is(target error) bool {
	return target == ErrOutcomeUnknown && e.Outcome == OutcomeUnknown
}

// Unwrap returns the cause, the context's error when it differs from the
// cause, and the last attempt's error, leaving out the nil ones.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 3)
	for _, err := range [...]error{e.Cause, e.ctxErr, e.Last} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Permanent marks err as not worth retrying: Do stops after the attempt
// that returned it. The marker is found through fmt.Errorf's %w and
// errors.Join, and errors.Is and errors.As see through it to err.
// Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return errorText(p.err) }
func (p *permanentError) Unwrap() error { return p.err }

// After marks err with a delay the server asked for, such as an HTTP
// Retry-After or a gRPC pushback: the next wait is d (negative is 0), not
// jittered, capped by [WithMaxDelay] or else at 30s. The waits after it
// go on with the backoff by attempt number: a server naming one wait has
// not said its overload is over, so the schedule does not start again
// (gRFC A6 restarts it; retrygrpc can). A marked error is retried even if
// [WithRetryIf] refuses it; [Permanent] still wins. errors.Is and
// errors.As see through the marker. After(nil, d) is nil.
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, delay: max(d, 0)}
}

type retryAfterError struct {
	err   error
	delay time.Duration
}

func (r *retryAfterError) Error() string { return errorText(r.err) }
func (r *retryAfterError) Unwrap() error { return r.err }

// errorText is err.Error(), or, if that panics, what fmt prints for err:
// "<nil>" for a nil pointer, as a typed nil returned as an error often is.
// A failed call must still be reported, logged and dead-lettered whatever
// its error's Error method does.
func errorText(err error) (s string) {
	defer func() {
		if recover() != nil {
			s = fmt.Sprint(err)
		}
	}()
	return err.Error()
}
