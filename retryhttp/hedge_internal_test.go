package retryhttp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
)

type closeCount struct {
	io.Reader
	n *atomic.Int32
}

func (c closeCount) Close() error { c.n.Add(1); return nil }

// TestALosingOutcomeIsClosedByRetry: an outcome is an io.Closer, so
// package retry closes the response of an attempt that succeeded after
// another had won.
func TestALosingOutcomeIsClosedByRetry(t *testing.T) {
	r, err := retry.New(retry.WithMaxAttempts(2), retry.WithHedge(&retry.HedgeOptions{Delay: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	var calls, closed atomic.Int32
	out, err := retry.HedgeValue(context.Background(), r, func(ctx context.Context) (outcome, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // the hedge won; answer all the same
			return outcome{resp: &http.Response{StatusCode: 200, Body: closeCount{strings.NewReader("first"), &closed}}}, nil
		}
		return outcome{resp: &http.Response{StatusCode: 201, Body: http.NoBody}}, nil
	})
	if err != nil || out.resp.StatusCode != 201 {
		t.Fatalf("got %v, %v; want the hedge's 201", out.resp, err)
	}
	if n := closed.Load(); n != 1 {
		t.Fatalf("the loser's body was closed %d times, want 1", n)
	}
	if err := (outcome{status: 201}).Close(); err != nil {
		t.Fatalf("a replayed outcome's Close: %v", err)
	}
}
