package pgstore_test

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/storetest"
)

// TestContract runs the shared store contract with time on a mock clock.
func TestContract(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store, _, _ := newStore(t, &pgstore.Options{Clock: mock})
	storetest.TestIdempotencyStore(t, storetest.Harness{
		New:     func(*testing.T) idempotency.Store { return store },
		Advance: func(_ *testing.T, d time.Duration) { mock.Add(d) },
	})
}

// TestContractServerClock runs it again on PostgreSQL's now(), with
// leases short enough that letting them run out costs a few milliseconds.
func TestContractServerClock(t *testing.T) {
	store, _, _ := newStore(t, nil)
	storetest.TestIdempotencyStore(t, storetest.Harness{
		New:     func(*testing.T) idempotency.Store { return store },
		Advance: func(_ *testing.T, d time.Duration) { time.Sleep(d) },
		Short:   5 * time.Millisecond,
	})
}

// TestUnknownOutcome runs the unknown-outcome checks on PostgreSQL's
// now(): a lease of 500ms, renewed every 167ms, so that a store slowed by the
// rest of the suite still answers in time; each subtest takes a few
// seconds.
func TestUnknownOutcome(t *testing.T) {
	store, _, _ := newStore(t, nil)
	storetest.TestUnknownOutcome(t, storetest.UnknownOutcome{New: func(*testing.T) idempotency.Store { return store }, Lease: 500 * time.Millisecond})
}
