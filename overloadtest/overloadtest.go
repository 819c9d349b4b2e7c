// Package overloadtest checks that a [overload.Budget], a
// [overload.Breaker] or a [overload.Limit] keeps the contract Do relies
// on, as storetest does for stores: safe for concurrent use, never
// blocking (but a Limit's Acquire, within its context), and answering
// Do's questions with nil or an error. Implementations call [TestBudget],
// [TestBreaker] or [TestLimit] from their own tests:
//
//	func TestBudget(t *testing.T) {
//		overloadtest.TestBudget(t, func(t *testing.T) overload.Budget {
//			b, err := overload.NewRatio(overload.RatioOptions{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return b
//		})
//	}
//
// Run them with -race too: the concurrent subtests are where a data race
// shows. It needs only the standard library's testing package.
package overloadtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/internal/contract"
	"github.com/steadfast-go/retry/overload"
)

// workers and rounds size the concurrent subtests: enough to interleave
// on any machine, few enough to run in milliseconds.
const (
	workers = 8
	rounds  = 500
)

// blockLimit is how long one method may take before the suite calls it
// blocked. It is generous: a method that waits for anything at all is
// wrong, and this catches the ones that wait for good.
const blockLimit = 5 * time.Second

// TestBudget checks b's contract: its methods may be called from many
// goroutines at once, return at once, and Do, driving it from many calls,
// ends every call with nil or an *Error whose outcome a budget may cause.
// newBudget makes a fresh budget for each subtest.
func TestBudget(t *testing.T, newBudget func(t *testing.T) overload.Budget) {
	t.Run("concurrent use", func(t *testing.T) {
		b := newBudget(t)
		contract.Concurrently(workers, rounds, func(w, i int) {
			failed := (i+w)%3 != 0
			b.Attempted(1, failed, false)
			if !failed {
				return
			}
			b.Attempted(2, true, i%7 == 0)
			if b.Retry(time.Millisecond) == nil {
				b.Waited()
			}
			_ = b.Retry(0) // a zero wait: no Waited follows
		})
	})
	t.Run("does not block", func(t *testing.T) {
		b := newBudget(t)
		contract.Returns(t, "Attempted", blockLimit, func() { b.Attempted(1, true, false) })
		var err error
		contract.Returns(t, "Retry", blockLimit, func() { err = b.Retry(time.Second) })
		if err == nil {
			contract.Returns(t, "Waited", blockLimit, b.Waited)
		}
	})
	t.Run("through Do", func(t *testing.T) {
		r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Budget: newBudget(t)}), retry.WithBackoff(retry.Constant(0)), retry.WithMaxAttempts(4))
		if err != nil {
			t.Fatal(err)
		}
		throughDo(t, r, retry.OutcomeExhausted, retry.OutcomeRefused)
	})
}

// TestBreaker checks b's contract: Allow may be called from many
// goroutines at once and returns at once, with a done to call once or an
// error, and Do, driving it from many calls, ends every call with nil or
// an *Error whose outcome a breaker may cause. newBreaker makes a fresh
// breaker for each subtest.
func TestBreaker(t *testing.T, newBreaker func(t *testing.T) overload.Breaker) {
	errDownstream := errors.New("overloadtest: the downstream failed")
	t.Run("concurrent use", func(t *testing.T) {
		b := newBreaker(t)
		contract.Concurrently(workers, rounds, func(w, i int) {
			done, err := b.Allow()
			switch {
			case err != nil:
			case done == nil:
				t.Error("Allow returned neither done nor an error")
			case (i+w)%3 == 0:
				done(errDownstream)
			default:
				done(nil)
			}
		})
	})
	t.Run("does not block", func(t *testing.T) {
		b := newBreaker(t)
		var done func(error)
		var err error
		contract.Returns(t, "Allow", blockLimit, func() { done, err = b.Allow() })
		if err == nil && done != nil {
			contract.Returns(t, "done", blockLimit, func() { done(errDownstream) })
		}
	})
	t.Run("through Do", func(t *testing.T) {
		r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Breaker: newBreaker(t), NoBudget: true}), retry.WithBackoff(retry.Constant(0)), retry.WithMaxAttempts(4))
		if err != nil {
			t.Fatal(err)
		}
		throughDo(t, r, retry.OutcomeExhausted, retry.OutcomeRefused)
	})
}

// TestLimit checks l's contract: Acquire and Release may be called from
// many goroutines at once, Release and an Acquire whose context is done
// return at once, a refusal matches [overload.ErrLimitExceeded], and Do
// and Hedge, driving it from many calls, give back every permit they
// took and end every call with nil or an *Error a limit may cause.
// newLimit makes a fresh limit for each subtest.
func TestLimit(t *testing.T, newLimit func(t *testing.T) overload.Limit) {
	results := []overload.Result{overload.Answered, overload.Failed, overload.Dropped}
	kinds := []overload.Kind{overload.FirstAttempt, overload.RetryAttempt, overload.HedgeAttempt}
	t.Run("concurrent use", func(t *testing.T) {
		l := newLimit(t)
		contract.Concurrently(workers, rounds, func(w, i int) {
			ctx, cancel := context.WithTimeout(overload.WithCriticality(context.Background(), overload.Criticality(i%3)), time.Millisecond)
			defer cancel()
			a := overload.Attempt{Kind: kinds[(w+i)%3]}
			if err := l.Acquire(ctx, a); err != nil {
				if !errors.Is(err, overload.ErrLimitExceeded) {
					t.Errorf("Acquire refused with %v, which does not match overload.ErrLimitExceeded", err)
				}
				return
			}
			l.Release(results[i%3], time.Duration(i)*time.Millisecond)
		})
	})
	t.Run("does not block", func(t *testing.T) {
		l := newLimit(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var err error
		contract.Returns(t, "Acquire with a done context", blockLimit, func() { err = l.Acquire(ctx, overload.Attempt{}) })
		if err == nil {
			contract.Returns(t, "Release", blockLimit, func() { l.Release(overload.Answered, time.Millisecond) })
		}
	})
	t.Run("through Do and Hedge", func(t *testing.T) {
		l := &countingLimit{Limit: newLimit(t)}
		r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true}), retry.WithBackoff(retry.Constant(0)), retry.WithMaxAttempts(4),
			retry.WithHedge(&retry.HedgeOptions{Delay: time.Microsecond}))
		if err != nil {
			t.Fatal(err)
		}
		throughDo(t, r, retry.OutcomeExhausted, retry.OutcomeRefused)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range rounds / 10 {
					err := r.Hedge(context.Background(), func(context.Context) error { return nil })
					if err != nil && !errors.Is(err, overload.ErrLimitExceeded) {
						t.Errorf("Hedge returned %v, which a limit cannot cause here", err)
					}
				}
			})
		}
		wg.Wait()
		if a, r := l.acquired.Load(), l.released.Load(); a != r || a == 0 {
			t.Errorf("Do took %d permits and gave back %d", a, r)
		}
	})
}

// countingLimit counts the permits Do takes and gives back.
type countingLimit struct {
	overload.Limit
	acquired, released atomic.Int64
}

func (l *countingLimit) Acquire(ctx context.Context, a overload.Attempt) error {
	err := l.Limit.Acquire(ctx, a)
	if err == nil {
		l.acquired.Add(1)
	}
	return err
}

func (l *countingLimit) Release(r overload.Result, latency time.Duration) {
	l.released.Add(1)
	l.Limit.Release(r, latency)
}

// throughDo runs many calls of r at once, each failing its first two
// attempts, and checks that each ends with nil or an *Error of one of the
// outcomes allowed, as many attempts as it says, and fn called once per
// attempt.
func throughDo(t *testing.T, r *retry.Retrier, allowed ...retry.Outcome) {
	t.Helper()
	errTransient := errors.New("overloadtest: transient")
	var wg sync.WaitGroup
	for range workers * 8 {
		wg.Go(func() {
			for range rounds / 10 {
				calls := 0
				err := r.Do(context.Background(), func(context.Context) error {
					if calls++; calls <= 2 {
						return errTransient
					}
					return nil
				})
				if err == nil {
					continue
				}
				var e *retry.Error
				if !errors.As(err, &e) {
					t.Errorf("Do returned %v, not an *Error", err)
					return
				}
				ok := false
				for _, o := range allowed {
					ok = ok || e.Outcome == o
				}
				if !ok {
					t.Errorf("Do ended with %v, which the budget or breaker cannot cause here", e.Outcome)
					return
				}
				if e.Attempts != calls {
					t.Errorf("Do reported %d attempts, fn was called %d times", e.Attempts, calls)
					return
				}
			}
		})
	}
	wg.Wait()
}
