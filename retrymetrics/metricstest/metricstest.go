// Package metricstest holds the test scenarios that the metrics observers
// of github.com/steadfast-go/retry share (the retry package's Stats,
// retryprom and retryotel), so that each proves the same behaviour
// against its own metrics. An Observer of your own can run them too.
//
// It needs only the standard library's testing package. Each scenario
// runs in its own testing/synctest bubble, so waits take no real time.
package metricstest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// ErrFlaky is the error of the functions returned by Failing.
var ErrFlaky = errors.New("flaky")

// Failing returns a function that fails with ErrFlaky n-1 times, then
// returns last. It counts its calls without a lock: use it for one call
// of Do at a time.
func Failing(n int, last error) func(context.Context) error {
	calls := 0
	return func(context.Context) error {
		calls++
		if calls < n {
			return ErrFlaky
		}
		return last
	}
}

// Gauges runs 20 calls of the operation "op" through obs at once, each
// failing, with 3 attempts and 1s waits. Half the calls have a 1.5s
// deadline, so they stop when their second wait would pass it; the rest
// are cancelled during their second wait. It checks the calls in flight
// and the waits in progress, as read by inFlight and waiting, at each
// step: all 20 calls, then 10, then none.
func Gauges(t *testing.T, obs retry.Observer, inFlight, waiting func() float64) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		// No budget: the gauges are what is checked, and 20 calls alone
		// earn a ratio budget only 22 retries of the 40 they ask for.
		r, err := retry.New(retry.WithName("op"), retry.WithObserver(obs), retry.WithMaxAttempts(3),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		if err != nil {
			t.Fatalf("retry.New: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				c := ctx
				if i%2 == 0 {
					var cc context.CancelFunc
					c, cc = context.WithTimeout(ctx, 1500*time.Millisecond)
					defer cc()
				}
				_ = r.Do(c, Failing(9, nil))
			})
		}
		check := func(when string, want float64) {
			t.Helper()
			if got := inFlight(); got != want {
				t.Errorf("calls in flight %s: %v, want %v", when, got, want)
			}
			if got := waiting(); got != want {
				t.Errorf("waits in progress %s: %v, want %v", when, got, want)
			}
		}
		synctest.Wait()
		check("while all wait", n)
		time.Sleep(1200 * time.Millisecond)
		synctest.Wait()
		check("after the deadlines", n/2)
		cancel()
		wg.Wait()
		check("at the end", 0)
	})
}

// ThreeCalls makes three calls of the operation "charge-card" through obs,
// with 3 attempts and 1s waits: a success after 2 retries (2s), attempts
// exhausted (2s), and a permanent error at the first attempt (0s). That
// is 7 attempts, 4 retries. The caller then checks what obs counted.
func ThreeCalls(t *testing.T, obs retry.Observer) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		if err != nil {
			t.Fatalf("retry.New: %v", err)
		}
		ctx := t.Context()
		if err := r.Do(ctx, Failing(3, nil)); err != nil {
			t.Fatalf("first call: %v, want nil", err)
		}
		if err := r.Do(ctx, Failing(9, nil)); !errors.Is(err, retry.ErrExhausted) {
			t.Fatalf("second call: %v, want retry.ErrExhausted", err)
		}
		if err := r.Do(ctx, Failing(1, retry.Permanent(ErrFlaky))); !errors.Is(err, ErrFlaky) {
			t.Fatalf("third call: %v, want ErrFlaky", err)
		}
	})
}

// NoAllocation checks that a first-try success through a Retrier with obs
// makes no allocation once the operation has been seen. It skips under
// the race detector, which allocates on its own.
func NoAllocation(t *testing.T, obs retry.Observer) {
	t.Helper()
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs))
	if err != nil {
		t.Fatalf("retry.New: %v", err)
	}
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	_ = r.Do(ctx, fn) // creates the operation's series
	if n := testing.AllocsPerRun(1000, func() { _ = r.Do(ctx, fn) }); n != 0 {
		t.Errorf("a first-try success allocates %v times, want 0", n)
	}
}

// Refusals makes five calls of the operation "op" through obs that end
// with retry.OutcomeRefused, one by each of the overload package's
// refusers: one whose second retry a small budget refuses (two attempts,
// one 1s wait between them), one that an open breaker refuses before any
// attempt, one whose retry a full concurrency limit refuses after its 1s
// wait (one attempt), one whose retry a rate of one attempt per 10s
// refuses after its 1s wait (one attempt), and one with a 1s deadline
// that a 10s pause refuses before any attempt. Each call's error must
// match its refusal; afterwards the calls in flight and the waits in
// progress, as read by inFlight and waiting, must be 0. The observer's
// own counts are the caller's to check: 5 refused calls (one by each of
// budget, breaker, limit, rate and pause), 4 attempts, 1 retry, 2 calls
// with no attempt.
func Refusals(t *testing.T, obs retry.Observer, inFlight, waiting func() float64) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		empty, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 4})
		if err != nil {
			t.Fatalf("NewTokenBucket: %v", err)
		}
		common := []retry.Option{retry.WithName("op"), retry.WithObserver(obs),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter)}
		err = retry.Do(t.Context(), Failing(9, nil), append(common, retry.WithOverload(&retry.OverloadOptions{Budget: empty}))...)
		if !errors.Is(err, overload.ErrBudgetExhausted) {
			t.Errorf("the budget's refusal: %v, want an error matching overload.ErrBudgetExhausted", err)
		}
		err = retry.Do(t.Context(), Failing(1, nil), append(common, retry.WithOverload(&retry.OverloadOptions{Breaker: openBreaker{}}))...)
		if !errors.Is(err, overload.ErrCircuitOpen) {
			t.Errorf("the breaker's refusal: %v, want an error matching overload.ErrCircuitOpen", err)
		}
		err = retry.Do(t.Context(), Failing(9, nil), append(common, retry.WithOverload(&retry.OverloadOptions{Limit: nearlyFullLimit(t)}))...)
		if !errors.Is(err, overload.ErrLimitExceeded) {
			t.Errorf("the limit's refusal: %v, want an error matching overload.ErrLimitExceeded", err)
		}
		err = retry.Do(t.Context(), Failing(9, nil), append(common, retry.WithOverload(&retry.OverloadOptions{Rate: slowRate(t)}))...)
		if !errors.Is(err, overload.ErrRateLimited) {
			t.Errorf("the rate's refusal: %v, want an error matching overload.ErrRateLimited", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err = retry.Do(ctx, Failing(1, nil), append(common, retry.WithOverload(&retry.OverloadOptions{Pause: longPause(t)}))...)
		if !errors.Is(err, overload.ErrPaused) {
			t.Errorf("the pause's refusal: %v, want an error matching overload.ErrPaused", err)
		}
		if got := inFlight(); got != 0 {
			t.Errorf("calls in flight after the refusals: %v, want 0", got)
		}
		if got := waiting(); got != 0 {
			t.Errorf("waits in progress after the refusals: %v, want 0", got)
		}
	})
}

// nearlyFullLimit returns a fixed limit of 10 with 9 permits held until
// the test ends: a first attempt takes the last one, and a retry, which
// may use only nine tenths of the limit, is refused.
func nearlyFullLimit(t *testing.T) *overload.Adaptive {
	t.Helper()
	l, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 10, Max: 10})
	if err != nil {
		t.Fatalf("NewAdaptive: %v", err)
	}
	for range 9 {
		if err := l.Acquire(t.Context(), overload.Attempt{}); err != nil {
			t.Fatalf("Acquire: %v", err)
		}
	}
	t.Cleanup(func() {
		for range 9 {
			l.Release(overload.Dropped, 0)
		}
	})
	return l
}

// slowRate admits one attempt per 10s: a first attempt goes, and its
// retry 1s later is refused.
func slowRate(t *testing.T) *overload.Rate {
	t.Helper()
	r, err := overload.NewRate(overload.RateOptions{PerSecond: 0.1})
	if err != nil {
		t.Fatalf("NewRate: %v", err)
	}
	return r
}

// longPause returns a pause in force for the next 10s, as after a
// server's Retry-After of 10s.
func longPause(t *testing.T) *overload.Pause {
	t.Helper()
	p, err := overload.NewPause(overload.PauseOptions{})
	if err != nil {
		t.Fatalf("NewPause: %v", err)
	}
	p.Extend(t.Context(), 10*time.Second)
	return p
}

// openBreaker refuses every attempt.
type openBreaker struct{}

func (openBreaker) Allow() (func(error), error) { return nil, overload.ErrCircuitOpen }
