package deadletter_test

import (
	"testing"

	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/deadlettertest"
)

// TestMemorySinkContract and TestFileSinkContract run the contract suite
// that every sink passes, pgdeadletter's too: round trips, refusals,
// clipping, concurrency, marks, and the Filter semantics of List and
// Purge.
func TestMemorySinkContract(t *testing.T) {
	t.Parallel()
	deadlettertest.TestSink(t, deadlettertest.Harness{
		New: func(*testing.T) deadletter.Source { return deadletter.NewMemorySink() },
	})
}

// TestZeroMemorySinkContract: the zero MemorySink is a sink ready to use.
func TestZeroMemorySinkContract(t *testing.T) {
	t.Parallel()
	deadlettertest.TestSink(t, deadlettertest.Harness{
		New: func(*testing.T) deadletter.Source { return new(deadletter.MemorySink) },
	})
}

func TestFileSinkContract(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]*deadletter.FileOptions{
		"group_commit": nil,
		"sync_each":    {SyncEach: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			deadlettertest.TestSink(t, deadlettertest.Harness{
				New: func(t *testing.T) deadletter.Source { s, _ := openFileSink(t, opts); return s },
			})
		})
	}
}
