package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
)

// UnknownOutcome configures [TestUnknownOutcome].
type UnknownOutcome struct {
	// New returns the store for one subtest, holding none of its keys
	// (the suite puts a random prefix on them). Required.
	New func(t *testing.T) idempotency.Store
	// Run runs one subtest's body, f: for a store on the real clock,
	// inside a testing/synctest bubble (func(t, f) { synctest.Test(t, f) }),
	// so that its waits take no time. Default: f(t), in real time.
	Run func(t *testing.T, f func(t *testing.T))
	// Lease is the idempotency lease: well above the store's round trip
	// under load (a renewal must be answered within a tenth of it), as
	// 500ms for a server on loopback. Default: 1s.
	Lease time.Duration
}

// TestUnknownOutcome checks what Do does when the caller's context ends
// while fn runs and when fn outlives its lease, in three subtests of a
// few leases of real time each. The package doc lists what they check.
func TestUnknownOutcome(t *testing.T, c UnknownOutcome) {
	t.Helper()
	if c.New == nil {
		t.Fatal("storetest: UnknownOutcome.New is required")
	}
	if c.Lease <= 0 {
		c.Lease = time.Second
	}
	if c.Run == nil {
		c.Run = func(t *testing.T, f func(t *testing.T)) { f(t) }
	}
	prefix := randomPrefix(t)
	var store idempotency.Store // the subtest's
	newR := func(t *testing.T, key string, o retry.IdempotencyOptions, extra ...retry.Option) *retry.Retrier {
		t.Helper()
		o.Key, o.Lease = prefix+key, c.Lease
		r, err := retry.New(append([]retry.Option{retry.WithIdempotency(store, &o),
			retry.WithBackoff(retry.Constant(time.Millisecond)), retry.WithJitter(retry.NoJitter)}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// cut runs one call whose context ends while fn runs, after fn acted.
	// The deadline is half a lease away, so that the claim before fn,
	// one round trip, falls well within it even on a loaded machine (a
	// tenth was too close); renewals keep the claim held past it.
	cut := func(t *testing.T, r *retry.Retrier, runs *atomic.Int32) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), c.Lease/2)
		defer cancel()
		err := r.Do(ctx, func(ctx context.Context) error {
			runs.Add(1) // the side effect, then a slow reply
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, retry.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call cut by its deadline while fn ran: got %v, want an error matching ErrOutcomeUnknown and context.DeadlineExceeded", err)
		}
	}
	count := func(runs *atomic.Int32) func(context.Context) error {
		return func(context.Context) error { runs.Add(1); return nil }
	}
	held := func(t *testing.T, r *retry.Retrier, runs *atomic.Int32) {
		t.Helper()
		if err := r.Do(context.Background(), count(runs)); !errors.Is(err, retry.ErrInProgress) {
			t.Fatalf("a call while the key is held: got %v, want ErrInProgress", err)
		}
	}
	failWhileHeld := retry.IdempotencyOptions{FailWhileHeld: true}

	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			c.Run(t, func(t *testing.T) { store = c.New(t); f(t) })
		})
	}

	run("at-most-once", func(t *testing.T) {
		var runs atomic.Int32
		cut(t, newR(t, "most", retry.IdempotencyOptions{}), &runs)
		for _, when := range []string{"at once", "after the lease"} {
			err := newR(t, "most", retry.IdempotencyOptions{}).Do(context.Background(), count(&runs))
			if !errors.Is(err, retry.ErrOutcomeUnknown) || !errors.Is(err, retry.ErrReplayed) {
				t.Fatalf("the next call %s: got %v, want the unknown outcome replayed", when, err)
			}
			time.Sleep(2 * c.Lease)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("fn ran %d times, want 1", n)
		}
	})

	run("at-least-once", func(t *testing.T) {
		var runs atomic.Int32
		o := retry.IdempotencyOptions{AtLeastOnce: true}
		cut(t, newR(t, "least", o), &runs)
		held(t, newR(t, "least", failWhileHeld, retry.WithMaxAttempts(1)), &runs)
		if n := runs.Load(); n != 1 {
			t.Fatalf("fn ran %d times before the lease ended, want 1", n)
		}
		time.Sleep(2 * c.Lease)
		if err := newR(t, "least", o).Do(context.Background(), count(&runs)); err != nil {
			t.Fatalf("a call after the lease: %v", err)
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("fn ran %d times, want 2: at least once runs it again after the lease", n)
		}
	})

	run("renewed-while-fn-runs", func(t *testing.T) {
		var runs atomic.Int32
		done := make(chan error, 1)
		started := make(chan struct{})
		go func() {
			done <- newR(t, "long", retry.IdempotencyOptions{}).Do(context.Background(), func(context.Context) error {
				runs.Add(1)
				close(started)
				time.Sleep(5 * c.Lease)
				return nil
			})
		}()
		<-started
		for range 3 {
			time.Sleep(c.Lease)
			held(t, newR(t, "long", failWhileHeld, retry.WithMaxAttempts(1)), &runs)
		}
		if err := <-done; err != nil {
			t.Fatalf("the call whose fn ran five leases: %v", err)
		}
		if err := newR(t, "long", retry.IdempotencyOptions{}).Do(context.Background(), count(&runs)); err != nil {
			t.Fatalf("the next call: %v, want the success replayed", err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("fn ran %d times, want 1", n)
		}
	})
}
