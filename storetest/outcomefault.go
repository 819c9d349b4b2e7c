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

// OutcomeFault configures [TestOutcomeAfterFault].
type OutcomeFault struct {
	// Store is the store under test. Required.
	Store idempotency.Store
	// Break makes every call of Store fail or hang, as a server that died
	// or a table locked by another session. It runs inside fn, after the
	// claim, on fn's first run in each subtest. Required.
	Break func(t *testing.T)
	// Mend ends what Break did. It runs after the first failed Complete
	// in the subtest where the fault ends within the lease, and at the
	// end of the other. Required.
	Mend func(t *testing.T)
	// Lease is the idempotency lease. Default: 1s.
	Lease time.Duration
	// StoreTimeout bounds each store call; it must be well below Lease.
	// Default: 200ms.
	StoreTimeout time.Duration
	// StoreError, if set, is what the error of a call whose outcome was
	// not recorded must also match: the store's own failure, such as
	// context.DeadlineExceeded.
	StoreError error
}

// TestOutcomeAfterFault checks what Do does when fn succeeds and the store
// then fails, in two subtests of about one Lease of real time each. The
// package doc lists what they check.
func TestOutcomeAfterFault(t *testing.T, c OutcomeFault) {
	t.Helper()
	if c.Store == nil || c.Break == nil || c.Mend == nil {
		t.Fatal("storetest: OutcomeFault.Store, .Break and .Mend are required")
	}
	if c.Lease <= 0 {
		c.Lease = time.Second
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = 200 * time.Millisecond
	}
	t.Run("fault-ends-within-lease", func(t *testing.T) {
		f := newFaultyCall(t, c, true)
		v, err := f.do(f.r)
		if err != nil || v != "receipt" {
			t.Fatalf("Do returned (%q, %v), want (\"receipt\", nil)", v, err)
		}
		if f.failed.Load() == 0 {
			t.Fatal("the fault did not fail Complete")
		}
		t.Logf("Do returned %v after fn; Complete called %d times, %d failed",
			time.Since(f.fnEnded).Round(time.Millisecond), f.completes.Load(), f.failed.Load())

		// Were the outcome not stored, this call would wait for the lease
		// to run out and run fn again.
		waiting, err := f.r.With(
			retry.WithBackoff(retry.Constant(20*time.Millisecond)), retry.WithMaxElapsed(2*c.Lease))
		if err != nil {
			t.Fatal(err)
		}
		v, err = f.do(waiting)
		if err != nil || v != "receipt" {
			t.Errorf("the next call returned (%q, %v), want the replay (\"receipt\", nil)", v, err)
		}
		if f.runs != 1 {
			t.Errorf("fn ran %d times, want 1: Do reported a plain success whose outcome was not stored", f.runs)
		}
	})
	t.Run("fault-outlasts-lease", func(t *testing.T) {
		f := newFaultyCall(t, c, false)
		v, err := f.do(f.r)
		took := time.Since(f.fnEnded)
		c.Mend(t)
		t.Logf("Do returned %v after fn; Complete called %d times, %d failed: %v",
			took.Round(time.Millisecond), f.completes.Load(), f.failed.Load(), err)
		if problem := CheckNotRecorded(err); problem != nil {
			t.Error(problem)
		}
		if c.StoreError != nil && !errors.Is(err, c.StoreError) {
			t.Errorf("error %v does not match the store's own error %v", err, c.StoreError)
		}
		if v != "receipt" {
			t.Errorf("DoValue returned %q, want fn's value \"receipt\"", v)
		}
		if f.runs != 1 {
			t.Errorf("fn ran %d times, want 1", f.runs)
		}
		if n := f.completes.Load(); n < 2 {
			t.Errorf("Complete was called %d times: it was not tried again", n)
		}
		if took < c.Lease/2 {
			t.Errorf("Do gave up %v after fn, long before the claim ran out (lease %v)", took, c.Lease)
		}
		if took >= c.Lease {
			t.Errorf("Do returned %v after fn, past the claim's lease (%v): another caller could have run fn meanwhile", took, c.Lease)
		}
	})
}

// faultyCall is a Do whose fn breaks the store on its first run.
type faultyCall struct {
	t         *testing.T
	c         OutcomeFault
	r         *retry.Retrier
	key       string
	runs      int
	fnEnded   time.Time
	completes atomic.Int32 // calls of Complete
	failed    atomic.Int32 // of those, failed
}

// newFaultyCall builds it; with mend, the first failed Complete mends
// the fault.
func newFaultyCall(t *testing.T, c OutcomeFault, mend bool) *faultyCall {
	f := &faultyCall{t: t, c: c, key: randomPrefix(t) + "charge:order-7"}
	observed := ObservedStore{Store: c.Store, AfterComplete: func(_ string, err error) {
		f.completes.Add(1)
		if err != nil && f.failed.Add(1) == 1 && mend {
			c.Mend(t)
		}
	}}
	r, err := retry.New(retry.WithIdempotency(observed, &retry.IdempotencyOptions{Lease: c.Lease, StoreTimeout: c.StoreTimeout}))
	if err != nil {
		t.Fatalf("storetest: retry.New: %v", err)
	}
	f.r = r
	return f
}

func (f *faultyCall) do(r *retry.Retrier) (string, error) {
	ctx := retry.ContextWithIdempotencyKey(context.Background(), f.key)
	return retry.DoValueOn(ctx, r, func(context.Context) (string, error) {
		f.runs++
		if f.runs == 1 {
			f.c.Break(f.t)
		}
		f.fnEnded = time.Now()
		return "receipt", nil
	})
}
