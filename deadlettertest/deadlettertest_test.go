package deadlettertest_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/deadlettertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A minimal Source, without List, Purge or Get: the suite runs the cases
// of every sink and skips the others.
type minimal struct{ m *deadletter.MemorySink }

func (s minimal) Put(ctx context.Context, dl retry.DeadLetter) error { return s.m.Put(ctx, dl) }
func (s minimal) Pending(ctx context.Context) ([]retry.DeadLetter, error) {
	return s.m.Pending(ctx)
}
func (s minimal) MarkRedriven(ctx context.Context, id string) (bool, error) {
	return s.m.MarkRedriven(ctx, id)
}

func TestSinkWithoutListOrPurge(t *testing.T) {
	var src deadletter.Source = minimal{deadletter.NewMemorySink()}
	if _, ok := src.(deadlettertest.Lister); ok {
		t.Fatal("minimal is a Lister")
	}
	deadlettertest.TestSink(t, deadlettertest.Harness{
		New: func(*testing.T) deadletter.Source { return minimal{deadletter.NewMemorySink()} },
	})
}
