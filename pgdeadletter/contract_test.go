package pgdeadletter_test

import (
	"testing"

	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/deadlettertest"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
)

// TestContract runs the suite that every sink passes, the sinks of
// package deadletter too: round trips, refusals, clipping, concurrency,
// marks, Get, and the Filter semantics of List and Purge. Each subtest
// has a table of its own.
func TestContract(t *testing.T) {
	pool := pgdltest.Pool(t)
	deadlettertest.TestSink(t, deadlettertest.Harness{
		New:      func(t *testing.T) deadletter.Source { return pgdltest.Sink(t, pool) },
		NotFound: pgdeadletter.ErrNotFound,
	})
}
