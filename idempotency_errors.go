package retry

import (
	"errors"
	"fmt"

	"github.com/steadfast-go/retry/idempotency"
)

// The errors of idempotent calls that stay inside the package: what an
// attempt returns when another caller holds the key, an outcome not
// recorded, a value the codec refused, and the tests of a call's last
// error that dead letters ask.

// errHeld is what an attempt returns when another caller holds the key.
// It is its own value, not ErrInProgress itself, so that Do can retry it
// whatever WithRetryIf says without also retrying an ErrInProgress that
// fn returns (from an inner Do).
var errHeld error = heldError{}

type heldError struct{}

func (heldError) Error() string {
	return "retry: idempotency key held by another caller; its outcome is not known yet"
}
func (heldError) Unwrap() error  { return ErrInProgress }
func (heldError) alwaysRetried() {}

// errEncodePanicked is the stored failure of a call whose fn succeeded and
// whose value's encoding panicked.
var errEncodePanicked = &codecError{op: "encoded", err: errCodecPanicked}

// errCodecPanicked stands for the panic of a codec in a codecError.
var errCodecPanicked = errors.New("the idempotency codec panicked")

// The Value of a stored unknown outcome: with its dead letter, or with
// none written, in which case each replay writes one.
const (
	unknownValue           = "outcome-unknown"
	unknownUnrecordedValue = "outcome-unknown; no dead letter"
)

// errLeaseEnding is why an outcome was not recorded when no try was left
// before the claim's lease could run out.
var errLeaseEnding = errors.New("the claim's lease was about to run out")

// outcomeNotRecordedError reports work that ran but whose outcome the store does
// not keep.
type outcomeNotRecordedError struct{ err error }

func (e *outcomeNotRecordedError) Error() string {
	return "retry: the work ran but its outcome is not recorded in the idempotency store: " + errorText(e.err)
}

// Is matches ErrOutcomeNotRecorded only: fn ran, so the error must not
// read as ErrIdempotencyUnavailable, which says it did not.
func (e *outcomeNotRecordedError) Is(target error) bool {
	return target == ErrOutcomeNotRecorded
}

func (e *outcomeNotRecordedError) Unwrap() error { return e.err }

// errTakenOver is the error of a call whose claim was lost while it waited
// between attempts: another caller may have taken the key over and run
// the work.
var errTakenOver = fmt.Errorf("%w; another caller may have taken the key over", idempotency.ErrLeaseLost)

// notFailedWork says whether a call whose last attempt ended with err
// failed without its work failing: it found another caller holding the
// key, lost its claim to one, replayed a stored outcome (but an unknown
// one stored without its dead letter), or ran fn successfully without its
// outcome being recorded. Such calls are not
// dead-lettered: a redrive would repeat work that did not fail, or that
// another caller owns. It looks into an inner Do's *Error too: an outer
// call whose fn returned an inner idempotent call's replay is one.
func notFailedWork(err error) bool {
	return walkThrough(err, func(err error) bool {
		switch e := err.(type) {
		case *replayedError:
			return !e.noDeadLetter
		case *outcomeNotRecordedError:
			return true
		case *codecError:
			return e.op == "encoded"
		}
		return err == errHeld || err == errTakenOver
	}) != nil
}

// replayedFailure says whether err is a failure replayed from the store
// (a notFailedWork case that Retrier.ForRedrive dead-letters all the
// same), by this call or an inner Do.
func replayedFailure(err error) bool {
	return walkThrough(err, func(err error) bool {
		_, ok := err.(*replayedError)
		return ok
	}) != nil
}

// codecError reports a value the codec could not encode or decode. Its text
// names the codec error's type only, since the error's own text may quote
// the value; errors.As and errors.Is still reach it.
type codecError struct {
	op  string // "encoded" or "decoded"
	err error
}

func (e *codecError) Error() string {
	if e.err == errCodecPanicked {
		return "retry: fn succeeded but the idempotency codec panicked encoding its value"
	}
	if e.op == "encoded" {
		return fmt.Sprintf("retry: fn succeeded but its value could not be encoded by the idempotency codec (%T)", e.err)
	}
	return fmt.Sprintf("retry: the stored value could not be decoded by the idempotency codec (%T)", e.err)
}

func (e *codecError) Unwrap() error { return e.err }
