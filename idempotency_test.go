package retry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retryslog"
)

// faultyStore wraps a store, counts calls, and injects failures.
type faultyStore struct {
	idempotency.Store
	mu                                  sync.Mutex
	claimErr, renewErr, completeErr     error
	hang                                bool // block every call until its context is done
	claims, renews, completes, releases int
	lastRecord                          idempotency.StoredOutcome
	claimStatus                         idempotency.ClaimStatus // returned instead of the real one when set
	completeFails                       int                     // fail this many Completes with completeErr, then succeed
	completeLosesReply                  bool                    // store the outcome, then report completeErr all the same
	thenFailClaims                      int                     // after a lost reply, fail this many Claims
}

func newFaulty() *faultyStore {
	return &faultyStore{Store: memstore.New(nil)}
}

func (f *faultyStore) enter(ctx context.Context, n *int, inject error) error {
	f.mu.Lock()
	*n++
	hang := f.hang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return inject
}

func (f *faultyStore) Claim(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, error) {
	inject := f.get(&f.claimErr)
	f.mu.Lock()
	if f.thenFailClaims > 0 && !f.completeLosesReply && f.completes > 0 {
		f.thenFailClaims--
		inject = errors.New("connection reset")
	}
	f.mu.Unlock()
	if err := f.enter(ctx, &f.claims, inject); err != nil {
		return idempotency.Claim{}, err
	}
	cl, err := f.Store.Claim(ctx, key, fp, lease)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claimStatus != 0 {
		cl.Status = f.claimStatus
	}
	return cl, err
}

func (f *faultyStore) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	if err := f.enter(ctx, &f.renews, f.get(&f.renewErr)); err != nil {
		return err
	}
	return f.Store.Renew(ctx, key, token, lease)
}

func (f *faultyStore) Complete(ctx context.Context, key, token string, rec idempotency.StoredOutcome, retention time.Duration) error {
	f.mu.Lock()
	inject := f.completeErr
	if f.completeFails > 0 {
		f.completeFails--
		if f.completeFails == 0 {
			f.completeErr = nil
		}
	}
	loses := f.completeLosesReply
	f.completeLosesReply = false
	f.mu.Unlock()
	if loses {
		if err := f.Store.Complete(ctx, key, token, rec, retention); err != nil {
			return err
		}
	}
	if err := f.enter(ctx, &f.completes, inject); err != nil {
		return err
	}
	f.mu.Lock()
	f.lastRecord = rec
	f.mu.Unlock()
	return f.Store.Complete(ctx, key, token, rec, retention)
}

func (f *faultyStore) Release(ctx context.Context, key, token string) error {
	if err := f.enter(ctx, &f.releases, nil); err != nil {
		return err
	}
	return f.Store.Release(ctx, key, token)
}

func (f *faultyStore) get(p *error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *p
}

func (f *faultyStore) set(fn func(*faultyStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faultyStore) counts() [4]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return [4]int{f.claims, f.renews, f.completes, f.releases}
}

// claimFree says whether key can be claimed at once, and releases it.
func claimFree(t *testing.T, s idempotency.Store, key string) bool {
	t.Helper()
	cl, err := s.Claim(context.Background(), key, "", time.Minute)
	require.NoError(t, err)
	if cl.Status == idempotency.ClaimAcquired {
		require.NoError(t, s.Release(context.Background(), key, cl.Token))
		return true
	}
	return false
}

type order struct {
	ID     int      `json:"id"`
	Amount float64  `json:"amount"`
	Tags   []string `json:"tags"`
}

var noWait = []retry.Option{retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.NoJitter)}

func TestIdempotencyKeysStayOutOfErrorsAndLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "charge:cust-8812:order-42"
		var logs strings.Builder
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		obs := retryslog.New(logger, nil)
		var errs []error
		do := func(store idempotency.Store, opts ...retry.Option) {
			_, err := retry.DoValue(context.Background(), func(context.Context) (string, error) { return "ok", nil },
				append([]retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: key, Lease: time.Second}), retry.WithObserver(obs)}, opts...)...)
			errs = append(errs, err)
		}
		mem := memstore.New(nil)
		do(mem, retry.WithPayload([]byte("a")))
		do(mem, retry.WithPayload([]byte("b"))) // key reuse
		down := newFaulty()
		down.set(func(f *faultyStore) { f.claimErr = errors.New("connection refused") })
		do(down) // store unavailable
		noComplete := newFaulty()
		noComplete.set(func(f *faultyStore) { f.completeErr = errors.New("connection reset") })
		do(noComplete) // outcome not recorded
		badCodec := newFaulty()
		codec := retry.WithIdempotency(badCodec, &retry.IdempotencyOptions{Key: key, Marshal: failingCodec{}.Marshal, Unmarshal: failingCodec{}.Unmarshal})
		do(badCodec, codec)
		do(badCodec, codec) // replayed codec failure

		require.Len(t, errs, 6)
		for i, err := range errs[1:] {
			require.Error(t, err, "call %d", i+1)
			assert.NotContains(t, err.Error(), "cust-8812", "call %d: %v", i+1, err)
		}
		assert.NotEmpty(t, logs.String())
		assert.NotContains(t, logs.String(), "cust-8812")
	})
}

// failingCodec cannot encode anything; its error quotes the value, as
// real codecs' errors may.
type failingCodec struct{}

func (failingCodec) Marshal(v any) ([]byte, error) {
	return nil, fmt.Errorf("cannot encode %v (cust-8812)", v)
}
func (failingCodec) Unmarshal([]byte, any) error { return errors.New("cannot decode") }
