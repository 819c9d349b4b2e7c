// Package retrygobreaker puts a circuit breaker of
// github.com/sony/gobreaker/v2 before every attempt of
// github.com/steadfast-go/retry:
//
//	b, err := retrygobreaker.NewBreaker(gobreaker.Settings{Name: "payments", Timeout: 30 * time.Second})
//	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Breaker: b}))
//
// While the breaker is open, an attempt is refused at once: fn is not
// called and no wait is spent, and Do returns an [*retry.Error] of
// [retry.OutcomeRefused] that matches [overload.ErrCircuitOpen],
// gobreaker.ErrOpenState (or gobreaker.ErrTooManyRequests when half-open
// with MaxRequests attempts under way) and the last real attempt's error,
// if there was one.
// Do also asks the breaker before each wait between attempts (Refuses):
// a call whose attempt has just tripped it ends at once, without the
// wait.
//
// # What counts as a failure
//
// gobreaker counts attempts, not calls: each attempt of each call is one
// request, so a call of three failed attempts is three consecutive
// failures. Do decides what failed, not gobreaker, and tells it through
// done's error:
//   - nil, a success, for a success and for an answer for good: a
//     [retry.Permanent] error, an error refused by retry.WithRetryIf;
//   - an error matching [overload.ErrNotCounted], excluded from the counts
//     (see [Excluded]), for an attempt that says nothing of the
//     downstream: the call's context ended it, it matched
//     context.Canceled, or another Retrier had given up on its error (an
//     [*retry.Error] in fn's error). A cancelled trial in the half-open
//     state neither closes nor re-opens the breaker;
//   - the attempt's error, a failure, for an error Do would retry
//     (attempts left or not), and for a panic in fn.
//
// [NewBreaker] excludes the attempts of [overload.ErrNotCounted] from the
// counts ([Excluded]) besides what Settings.IsExcluded excludes; a
// breaker given to [New] must be built with IsExcluded calling Excluded.
// Settings.IsSuccessful, if set, sees the failures' errors (a permanent
// error never reaches it: Do passes nil).
//
// # Cost
//
// A [Breaker] holds no state of its own beyond gobreaker's, which takes a
// mutex. Its refusals are built once, with the Breaker, so refusing an
// attempt makes no allocation.
package retrygobreaker

import (
	"errors"
	"fmt"

	"github.com/sony/gobreaker/v2"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// Breaker is a [overload.Breaker] on a gobreaker TwoStepCircuitBreaker, for
// [retry.OverloadOptions].Breaker; share one among the calls to one downstream. It is
// safe for concurrent use. Build it with [New] or [NewBreaker]: a zero or
// nil Breaker refuses each attempt, wrapping [retry.ErrInvalidOption].
type Breaker struct {
	cb      twoStep
	open    *refusal // the refusal of the open state
	tooMany *refusal // the refusal of the half-open state at MaxRequests
}

// twoStep is the part of gobreaker.TwoStepCircuitBreaker[T] that Breaker
// uses, whatever T is: T types only the Execute of gobreaker's
// one-step breaker, which the two-step one does not offer.
type twoStep interface {
	Allow() (done func(err error), err error)
	Name() string
	State() gobreaker.State
}

var _ overload.Breaker = (*Breaker)(nil)

// New adapts cb, a breaker other code may share, whose state and counts
// stay cb's own (cb.State, cb.Counts). Build cb with Settings.IsExcluded
// calling [Excluded], or attempts that say nothing of the downstream
// count as failures. A nil cb gives an error wrapping
// [retry.ErrInvalidOption].
func New[T any](cb *gobreaker.TwoStepCircuitBreaker[T]) (*Breaker, error) {
	if cb == nil {
		return nil, fmt.Errorf("%w: retrygobreaker.New: the breaker is nil; build one with gobreaker.NewTwoStepCircuitBreaker or use NewBreaker", retry.ErrInvalidOption)
	}
	return newBreaker(cb), nil
}

// NewBreaker builds a gobreaker TwoStepCircuitBreaker from st, excluding
// what [Excluded] reports from its counts, and adapts it. st's zero
// fields take gobreaker's defaults: one trial attempt when half-open,
// counts never cleared while closed, open for 60 seconds, open after
// more than 5 consecutive failed attempts. st.OnStateChange follows its
// state.
func NewBreaker(st gobreaker.Settings) (*Breaker, error) {
	if user := st.IsExcluded; user != nil {
		st.IsExcluded = func(err error) bool { return Excluded(err) || user(err) }
	} else {
		st.IsExcluded = Excluded
	}
	return newBreaker(gobreaker.NewTwoStepCircuitBreaker[struct{}](st)), nil
}

// newBreaker makes the refusals once, so that refusing an attempt costs
// no allocation: the breaker's name does not change.
func newBreaker(cb twoStep) *Breaker {
	name := cb.Name()
	return &Breaker{
		cb:      cb,
		open:    newRefusal(name, "is open", gobreaker.ErrOpenState),
		tooMany: newRefusal(name, "is half-open: too many requests", gobreaker.ErrTooManyRequests),
	}
}

// errNotBuilt refuses the attempts of a zero or nil Breaker. It matches
// retry.ErrInvalidOption, a mistake of the setup, and not
// overload.ErrCircuitOpen: no downstream is to blame. Its text does not
// begin with ErrInvalidOption's "retry: ", which the call's *Error
// already writes.
var errNotBuilt error = notBuilt{}

type notBuilt struct{}

func (notBuilt) Error() string {
	return "invalid option: retrygobreaker: the *Breaker is nil or zero, and refuses every attempt; build one with New or NewBreaker"
}
func (notBuilt) Unwrap() error { return retry.ErrInvalidOption }

// Allow asks leave to make an attempt; Do calls it before each attempt
// that would call fn. While gobreaker refuses, its error is the refusal
// the package doc describes, whose text names only the breaker and its
// state; otherwise done tells gobreaker how the attempt ended.
func (b *Breaker) Allow() (done func(err error), err error) {
	if b == nil || b.cb == nil {
		return nil, errNotBuilt
	}
	report, err := b.cb.Allow()
	if err != nil {
		return nil, b.refuse(err)
	}
	return report, nil
}

// Excluded reports whether err is what Do tells a breaker of an attempt
// that says nothing of the downstream ([overload.ErrNotCounted]), for the
// Settings.IsExcluded of a breaker given to [New]; [NewBreaker] sets it.
func Excluded(err error) bool { return errors.Is(err, overload.ErrNotCounted) }

// Refuses returns the error Allow would refuse with, or nil, without
// reserving a request; Do asks it before each wait between attempts, so
// that a call does not wait for an attempt the breaker would refuse.
func (b *Breaker) Refuses() error {
	if b == nil || b.cb == nil {
		return errNotBuilt
	}
	if b.cb.State() == gobreaker.StateOpen {
		return b.open
	}
	return nil
}

// refuse returns the refusal for gobreaker's error err.
func (b *Breaker) refuse(err error) error {
	switch err {
	case gobreaker.ErrOpenState:
		return b.open
	case gobreaker.ErrTooManyRequests:
		return b.tooMany
	}
	// gobreaker v2.4.0 has no other error; a later one still refuses.
	return newRefusal(b.cb.Name(), "refused the attempt: "+err.Error(), err)
}

// refusal is the error of a refused attempt: it matches
// overload.ErrCircuitOpen and gobreaker's error.
type refusal struct {
	msg  string
	errs [2]error
}

func newRefusal(name, state string, err error) *refusal {
	breaker := "the breaker"
	if name != "" {
		breaker = fmt.Sprintf("breaker %q", name)
	}
	return &refusal{
		msg:  fmt.Sprintf("%s: %s %s", overload.ErrCircuitOpen, breaker, state),
		errs: [2]error{overload.ErrCircuitOpen, err},
	}
}

func (r *refusal) Error() string   { return r.msg }
func (r *refusal) Unwrap() []error { return r.errs[:] }
