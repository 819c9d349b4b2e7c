package retrypgx

import (
	"errors"
	"fmt"

	"github.com/steadfast-go/retry"
)

// ErrCommitOutcomeUnknown is the cause of a call whose connection was lost
// while COMMIT was in flight, or whose COMMIT the server answered with
// SQLSTATE 40003: the transaction may or may not have committed. The call
// ends with [retry.OutcomeUnknown], matching [retry.ErrOutcomeUnknown] and
// this, and is not retried; see the package doc for the pattern that makes
// running it again safe.
var ErrCommitOutcomeUnknown = errors.New("retrypgx: the transaction may or may not have committed")

// Options tunes a [Runner]. A nil *Options, like the zero value, gives
// the defaults.
type Options struct {
	// NoDeadlockRetry makes a deadlock victim's error (SQLSTATE 40P01)
	// permanent. Default: false: it is retried, as PostgreSQL's
	// documentation advises, since the victim's transaction was rolled
	// back whole and the other one goes on; a deadlock that comes back on
	// every attempt is a lock-order bug that the attempts limit bounds.
	NoDeadlockRetry bool
	// RetryCodes are more SQLSTATEs whose ERROR answers are retried, as
	// five characters in upper case: "23505" (unique_violation) where two
	// transactions race to insert a key they chose after reading, the case
	// PostgreSQL's documentation gives. They never make a lost connection
	// at COMMIT retryable. Default: none.
	RetryCodes []string
	// CockroachRestart runs each call in one transaction with CockroachDB's
	// savepoint protocol: SAVEPOINT cockroach_restart after BEGIN, ROLLBACK
	// TO SAVEPOINT cockroach_restart before each retry, RELEASE SAVEPOINT
	// cockroach_restart (which commits there) before COMMIT. Not for
	// PostgreSQL, where a serialization failure dooms the transaction
	// past the savepoint. Tested against PostgreSQL only. Default: false.
	CockroachRestart bool
}

// Runner runs functions in transactions and runs them again, whole, when
// the database says to try again, on its Retrier's policy. Build one with
// [New]; it is immutable and safe for concurrent use.
type Runner struct {
	r               *retry.Retrier
	noDeadlockRetry bool
	retryCodes      []string
	savepoint       bool
}

// New returns a Runner that retries on r's policy: its attempts, backoff,
// jitter, budget, breaker, time budget, observers, idempotency and dead
// letters. A nil r means the zero [retry.Retrier]'s defaults (no budget).
// A bad option gives an error wrapping [retry.ErrInvalidOption].
func New(r *retry.Retrier, opts *Options) (*Runner, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if r == nil {
		r = &retry.Retrier{}
	}
	for _, c := range o.RetryCodes {
		if !validCode(c) {
			return nil, fmt.Errorf("%w: retrypgx: Options.RetryCodes holds %q; a SQLSTATE is five digits or upper-case letters, such as \"23505\"", retry.ErrInvalidOption, c)
		}
	}
	return &Runner{
		r:               r,
		noDeadlockRetry: o.NoDeadlockRetry,
		retryCodes:      append([]string(nil), o.RetryCodes...),
		savepoint:       o.CockroachRestart,
	}, nil
}

// validCode says whether c has the form of a SQLSTATE.
func validCode(c string) bool {
	if len(c) != 5 {
		return false
	}
	for i := 0; i < len(c); i++ {
		if b := c[i]; !(b >= '0' && b <= '9' || b >= 'A' && b <= 'Z') {
			return false
		}
	}
	return true
}

// commitUnknown is the error of the attempt whose COMMIT's outcome is
// unknown. It holds a Retrier's error of OutcomeUnknown, so that the
// Retrier running the call ends it with that outcome (one layer retries)
// and WithIdempotency applies its rules for unknown outcomes.
type commitUnknown struct {
	err   error
	inner *retry.Error
}

func newCommitUnknown(err error) *commitUnknown {
	return &commitUnknown{err: err, inner: &retry.Error{Outcome: retry.OutcomeUnknown, Attempts: 1, Cause: ErrCommitOutcomeUnknown}}
}

func (e *commitUnknown) Error() string   { return "retrypgx: COMMIT: " + e.err.Error() }
func (e *commitUnknown) Unwrap() []error { return []error{e.inner, e.err} }
