package storetest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
)

// ExactlyOnce configures [TestExactlyOnce].
type ExactlyOnce struct {
	// Store is the store under test. Required.
	Store idempotency.Store
	// Goroutines is how many callers call Do with every key. Default: 64.
	Goroutines int
	// Keys is how many keys each caller goes through, in the same order,
	// so that all callers contend for each key. Default: 200.
	Keys int
	// SideEffect, if set, is the work fn does for key: something counted
	// outside the process, such as INCR on a separate Redis key or an
	// INSERT into a separate table. An error from it is retried.
	SideEffect func(ctx context.Context, key string) error
	// Count, if set, returns how many times SideEffect ran for key; the
	// check wants exactly 1. The check also counts calls of fn itself.
	Count func(ctx context.Context, key string) (int, error)
	// Options are added after the check's own: wait mode, a 1ms constant
	// backoff without jitter, and unlimited attempts. Use them for a
	// lease or a store timeout suited to the store.
	Options []retry.Option
	// Timeout bounds the whole check. Default: 2 minutes.
	Timeout time.Duration
}

// TestExactlyOnce has Goroutines callers call retry.DoValue with the same
// Keys keys, in wait mode, and checks that fn (and SideEffect) ran exactly
// once per key and that every caller got nil and the value of the call
// that ran, identical for all callers of a key. Keys carry a random
// prefix, so one store may serve several runs.
func TestExactlyOnce(t *testing.T, c ExactlyOnce) {
	t.Helper()
	if c.Store == nil {
		t.Fatal("storetest: ExactlyOnce.Store is required")
	}
	if c.Goroutines <= 0 {
		c.Goroutines = 64
	}
	if c.Keys <= 0 {
		c.Keys = 200
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	prefix := randomPrefix(t)
	keys := make([]string, c.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%sorder-%d", prefix, i)
	}
	opts := append([]retry.Option{
		retry.WithBackoff(retry.Constant(time.Millisecond)),
		retry.WithJitter(retry.NoJitter),
		retry.WithMaxAttempts(math.MaxInt),
	}, c.Options...)
	r, err := retry.New(append(opts, retry.WithIdempotency(c.Store, nil))...)
	if err != nil {
		t.Fatalf("storetest: retry.New: %v", err)
	}

	calls := make([]atomic.Int32, c.Keys)
	got := make([][]string, c.Keys)
	for i := range got {
		got[i] = make([]string, c.Goroutines)
	}
	var wg sync.WaitGroup
	for g := range c.Goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, key := range keys {
				v, err := retry.DoValueOn(retry.ContextWithIdempotencyKey(ctx, key), r, func(ctx context.Context) (string, error) {
					calls[i].Add(1)
					if c.SideEffect != nil {
						if err := c.SideEffect(ctx, key); err != nil {
							return "", err
						}
					}
					return fmt.Sprintf("%s done by caller %d", key, g), nil
				})
				if err != nil {
					t.Errorf("caller %d, key %q: Do returned %v, want nil", g, key, err)
					return
				}
				got[i][g] = v
			}
		}()
	}
	wg.Wait()

	for i, key := range keys {
		if n := calls[i].Load(); n != 1 {
			t.Errorf("key %q: fn ran %d times, want exactly 1", key, n)
		}
		if c.Count != nil {
			n, err := c.Count(ctx, key)
			if err != nil {
				t.Errorf("key %q: Count: %v", key, err)
			} else if n != 1 {
				t.Errorf("key %q: the side effect happened %d times, want exactly 1", key, n)
			}
		}
		for g, v := range got[i] {
			if v != got[i][0] {
				t.Errorf("key %q: caller %d got %q, caller 0 got %q; want the same stored value", key, g, v, got[i][0])
				break
			}
		}
	}
}
