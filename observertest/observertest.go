// Package observertest checks that a [retry.Observer] keeps the contract
// Do relies on, as storetest does for stores: safe for concurrent use,
// never blocking and never panicking, whatever calls it hears of.
// Implementations call [TestObserver] from their own tests:
//
//	func TestStats(t *testing.T) {
//		observertest.TestObserver(t, func(t *testing.T) retry.Observer {
//			return new(retrystats.Stats)
//		})
//	}
//
// Run it with -race too: the concurrent calls are where a data race
// shows. It needs only the standard library's testing package.
package observertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/internal/contract"
)

// workers and calls size the run: enough to interleave every kind of
// event on any machine, few enough to take milliseconds.
const (
	workers = 8
	calls   = 200
)

// limit bounds the whole run: an observer that waits for anything at all
// is wrong, and this catches the ones that wait for good.
const limit = 30 * time.Second

// TestObserver has many calls at once report to an observer newObserver
// makes: first-try successes, successes after failures, permanent
// failures, exhausted calls, calls whose context ended before or between
// attempts, calls whose fn panicked, and hedged calls, whose attempts
// overlap and report from two goroutines. It checks that each call ends as
// it would without the observer, so that the observer neither blocks nor
// panics nor changes an outcome.
func TestObserver(t *testing.T, newObserver func(t *testing.T) retry.Observer) {
	r, err := retry.New(retry.WithObserver(newObserver(t)), retry.WithName("observertest"), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
		retry.WithBackoff(retry.Constant(time.Microsecond)), retry.WithJitter(retry.NoJitter), retry.WithMaxAttempts(3),
		retry.WithHedge(&retry.HedgeOptions{Delay: 100 * time.Microsecond}))
	if err != nil {
		t.Fatal(err)
	}
	contract.Returns(t, "the calls", limit, func() {
		contract.Concurrently(workers, calls, func(w, i int) {
			if err := oneCall(r, (w+i)%len(kinds)); err != nil {
				t.Error(err)
			}
		})
	})
}

var (
	errTransient = errors.New("observertest: transient")
	errForGood   = errors.New("observertest: for good")
	errPanicked  = errors.New("observertest: fn panicked")
)

// kinds are the calls the run makes, each with the outcome it must end
// with.
var kinds = [...]struct {
	fails   int   // attempts that fail before one succeeds; -1: all fail
	err     error // what a failure returns
	cancel  bool  // the context is done before the call
	panics  bool  // fn panics at its first attempt
	hedged  bool  // a call of Hedge whose first attempt answers only once a hedge has won
	outcome retry.Outcome
}{
	{fails: 0, outcome: retry.OutcomeSuccess},
	{fails: 2, err: errTransient, outcome: retry.OutcomeSuccess},
	{fails: -1, err: errTransient, outcome: retry.OutcomeExhausted},
	{fails: -1, err: retry.Permanent(errForGood), outcome: retry.OutcomePermanent},
	{cancel: true, outcome: retry.OutcomeCanceled},
	{panics: true},
	{hedged: true, outcome: retry.OutcomeSuccess},
}

// oneCall makes a call of kind k and says what went wrong, if anything.
func oneCall(r *retry.Retrier, k int) (problem error) {
	kind := kinds[k]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if kind.cancel {
		cancel()
	}
	if kind.panics {
		defer func() {
			if v := recover(); v != errPanicked {
				problem = errors.New("observertest: a panic in fn did not reach the caller as itself")
			}
		}()
	}
	var err error
	if kind.hedged {
		var n atomic.Int32
		err = r.Hedge(ctx, func(ctx context.Context) error {
			if n.Add(1) == 1 {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
	} else {
		n := 0
		err = r.Do(ctx, func(context.Context) error {
			n++
			switch {
			case kind.panics:
				panic(errPanicked)
			case kind.fails < 0 || n <= kind.fails:
				return kind.err
			}
			return nil
		})
	}
	if kind.panics {
		return errors.New("observertest: Do returned although fn panicked")
	}
	got := retry.OutcomeSuccess
	var e *retry.Error
	if errors.As(err, &e) {
		got = e.Outcome
	} else if err != nil {
		return errors.New("observertest: Do returned an error that holds no *retry.Error")
	}
	if got != kind.outcome {
		return errors.New("observertest: a call ended with " + got.String() + ", not " + kind.outcome.String())
	}
	return nil
}
