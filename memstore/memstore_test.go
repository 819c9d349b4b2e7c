package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/storetest"
)

func TestStoreContract(t *testing.T) {
	mock := clock.NewMock()
	storetest.TestIdempotencyStore(t, storetest.Harness{
		New: func(*testing.T) idempotency.Store {
			return memstore.New(&memstore.Options{Clock: mock})
		},
		Advance: func(_ *testing.T, d time.Duration) { mock.Add(d) },
		Short:   time.Minute,
	})
}

func TestStoreSweepsExpiredKeys(t *testing.T) {
	mock := clock.NewMock()
	s := memstore.New(&memstore.Options{Clock: mock})
	ctx := context.Background()
	for i := range 1000 {
		cl, err := s.Claim(ctx, fmt.Sprint("old-", i), "", time.Second)
		require.NoError(t, err)
		require.Equal(t, idempotency.ClaimAcquired, cl.Status)
	}
	require.Equal(t, 1000, s.Len())
	mock.Add(2 * time.Second)
	for i := range 100 {
		_, err := s.Claim(ctx, fmt.Sprint("new-", i), "", time.Hour)
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, s.Len(), 100+64, "expired keys were not swept when the store grew")
}

// heapInuse returns the heap in use after a full collection.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// A Go map keeps its peak size when keys are deleted: after a burst of
// keys has expired and been swept, the store rebuilds its map, so the
// heap falls back with the live keys (issue #20: 1 M keys, then 60 k
// live ones held 269 MiB).
func TestStoreGivesMemoryBackAfterAPeak(t *testing.T) {
	mock := clock.NewMock()
	s := memstore.New(&memstore.Options{Clock: mock})
	ctx := context.Background()
	base := heapInuse()
	// 120,000 keys of a one-minute lease: the last sweep while they
	// arrive is at 65,536 keys (all live), so the next is at 131,072.
	const burst = 120_000
	for i := range burst {
		_, err := s.Claim(ctx, "old-"+strconv.Itoa(i), "", time.Minute)
		require.NoError(t, err)
	}
	peak := heapInuse() - base
	mock.Add(2 * time.Minute)
	// New keys until the sweep that drops the burst: about 11,000.
	var live []idempotency.Claim
	for i := 0; s.Len() >= burst; i++ {
		require.Less(t, i, 20_000, "no sweep")
		cl, err := s.Claim(ctx, "new-"+strconv.Itoa(i), "", time.Hour)
		require.NoError(t, err)
		live = append(live, cl)
	}
	require.Equal(t, len(live), s.Len(), "the sweep left the live keys")
	after := heapInuse()
	after -= min(base, after)
	t.Logf("heap in use: %d KiB with %d keys, %d KiB with %d live ones", peak>>10, burst, after>>10, len(live))
	assert.Less(t, after, peak/4, "the map kept the memory of the expired keys")
	// The rebuilt map still holds every live claim.
	for i, cl := range live {
		require.NoError(t, s.Complete(ctx, "new-"+strconv.Itoa(i), cl.Token, idempotency.StoredOutcome{}, time.Hour))
	}
	runtime.KeepAlive(s)
}

func TestStoreRejectsBadArguments(t *testing.T) {
	s := memstore.New(nil)
	ctx := context.Background()
	_, err := s.Claim(ctx, "", "", time.Second)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	_, err = s.Claim(ctx, "k", "", 0)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	cl, err := s.Claim(ctx, "k", "", time.Second)
	require.NoError(t, err)
	assert.ErrorIs(t, s.Complete(ctx, "k", cl.Token, idempotency.StoredOutcome{}, -time.Second), retry.ErrInvalidOption)
	assert.ErrorIs(t, s.Renew(ctx, "k", cl.Token, 0), retry.ErrInvalidOption)
}

func TestStoreCompleteKeepsItsOwnCopy(t *testing.T) {
	s := memstore.New(nil)
	ctx := context.Background()
	cl, err := s.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	value := []byte(`{"receipt":"r-1"}`)
	require.NoError(t, s.Complete(ctx, "k", cl.Token, idempotency.StoredOutcome{Value: value}, time.Minute))
	copy(value, "XXXX") // the caller reuses its buffer after Complete

	got, err := s.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	want := idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: "fp", Outcome: idempotency.StoredOutcome{Value: []byte(`{"receipt":"r-1"}`)}}
	assert.Equal(t, want, got)
}

// BenchmarkStore measures one claim and one completion
// of a fresh key. Keys cycle through a fixed set whose records expire at
// once, so the store stays small.
func BenchmarkStore(b *testing.B) {
	const nKeys = 1 << 16
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = fmt.Sprint("charge:order-", i)
	}
	s := memstore.New(nil)
	ctx := context.Background()
	rec := idempotency.StoredOutcome{Value: []byte(`{"receipt":"r-1"}`)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := keys[i%nKeys]
		cl, err := s.Claim(ctx, key, "fp", time.Minute)
		if err != nil || cl.Status != idempotency.ClaimAcquired {
			b.Fatalf("Claim: %v %v", cl.Status, err)
		}
		if err := s.Complete(ctx, key, cl.Token, rec, time.Nanosecond); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdempotentDo measures a whole idempotent Do on a fresh key:
// claim, one successful attempt, encode and complete.
func BenchmarkIdempotentDo(b *testing.B) {
	const nKeys = 1 << 16
	ctxs := make([]context.Context, nKeys)
	for i := range ctxs {
		ctxs[i] = retry.ContextWithIdempotencyKey(context.Background(), fmt.Sprint("charge:order-", i))
	}
	r, err := retry.New(retry.WithIdempotency(memstore.New(nil), &retry.IdempotencyOptions{Retention: time.Nanosecond}))
	if err != nil {
		b.Fatal(err)
	}
	fn := func(context.Context) (int, error) { return 42, nil }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := retry.DoValueOn(ctxs[i%nKeys], r, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdempotentReplay measures a whole idempotent Do on a key
// whose success is stored: claim, find it completed, decode the value.
func BenchmarkIdempotentReplay(b *testing.B) {
	const nKeys = 1 << 16
	ctxs := make([]context.Context, nKeys)
	for i := range ctxs {
		ctxs[i] = retry.ContextWithIdempotencyKey(context.Background(), fmt.Sprint("charge:order-", i))
	}
	r, err := retry.New(retry.WithIdempotency(memstore.New(nil), nil))
	if err != nil {
		b.Fatal(err)
	}
	for _, ctx := range ctxs {
		if _, err := retry.DoValueOn(ctx, r, func(context.Context) (int, error) { return 42, nil }); err != nil {
			b.Fatal(err)
		}
	}
	fn := func(context.Context) (int, error) { return 0, errors.New("fn ran on a completed key") }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if v, err := retry.DoValueOn(ctxs[i%nKeys], r, fn); err != nil || v != 42 {
			b.Fatal(v, err)
		}
	}
}

// floorStore is the floor of the two benchmarks above: what an idempotent
// call must do on a store in memory, written by hand. A mutex and a map
// keyed by string; a claim reads the clock for its lease; the value is
// JSON, as IdempotencyOptions' default.
type floorStore struct {
	mu     sync.Mutex
	m      map[string]floorEntry
	tokens uint64
}

type floorEntry struct {
	token   uint64 // 0 when completed
	expires time.Time
	value   []byte
}

// BenchmarkFloorFirstKey is BenchmarkIdempotentDo's floor: claim a key
// that is free (its record expired), JSON-encode the value (the same int),
// store the bytes under the claim.
func BenchmarkFloorFirstKey(b *testing.B) {
	const nKeys = 1 << 16
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = fmt.Sprint("charge:order-", i)
	}
	s := &floorStore{m: make(map[string]floorEntry)}
	fn := func(context.Context) (int, error) { return 42, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := keys[i%nKeys]
		now := time.Now()
		s.mu.Lock()
		if e, ok := s.m[key]; ok && now.Before(e.expires) {
			s.mu.Unlock()
			b.Fatal("key not free")
		}
		s.tokens++
		tok := s.tokens
		s.m[key] = floorEntry{token: tok, expires: now.Add(time.Minute)}
		s.mu.Unlock()
		v, err := fn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		data, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		s.mu.Lock()
		if s.m[key].token != tok {
			s.mu.Unlock()
			b.Fatal("claim lost")
		}
		s.m[key] = floorEntry{expires: now.Add(time.Nanosecond), value: data}
		s.mu.Unlock()
	}
}

// BenchmarkFloorReplay is BenchmarkIdempotentReplay's floor: look a
// completed key up and JSON-decode its value.
func BenchmarkFloorReplay(b *testing.B) {
	const nKeys = 1 << 16
	keys := make([]string, nKeys)
	s := &floorStore{m: make(map[string]floorEntry)}
	for i := range keys {
		keys[i] = fmt.Sprint("charge:order-", i)
		data, _ := json.Marshal(42)
		s.m[keys[i]] = floorEntry{expires: time.Now().Add(time.Hour), value: data}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := keys[i%nKeys]
		now := time.Now()
		s.mu.Lock()
		e, ok := s.m[key]
		s.mu.Unlock()
		if !ok || e.token != 0 || !now.Before(e.expires) {
			b.Fatal("key not completed")
		}
		var v int
		if err := json.Unmarshal(e.value, &v); err != nil || v != 42 {
			b.Fatal(v, err)
		}
	}
}

// BenchmarkStoreParallel is the same from GOMAXPROCS
// goroutines at once, each on its own keys: the cost of the store's lock.
func BenchmarkStoreParallel(b *testing.B) {
	const nKeys = 1 << 14
	s := memstore.New(nil)
	rec := idempotency.StoredOutcome{Value: []byte(`{"receipt":"r-1"}`)}
	var worker atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1)
		keys := make([]string, nKeys)
		for i := range keys {
			keys[i] = fmt.Sprint("w", w, ":charge:order-", i)
		}
		ctx := context.Background()
		for i := 0; pb.Next(); i++ {
			key := keys[i%nKeys]
			cl, err := s.Claim(ctx, key, "fp", time.Minute)
			if err != nil || cl.Status != idempotency.ClaimAcquired {
				b.Errorf("Claim: %v %v", cl.Status, err)
				return
			}
			if err := s.Complete(ctx, key, cl.Token, rec, time.Nanosecond); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// checkUnusable asserts that every method of s returns an error that
// matches retry.ErrInvalidOption and contains want, without panicking,
// and that Do then fails closed, without calling fn.
func checkUnusable(t *testing.T, s *memstore.Store, want string) {
	t.Helper()
	ctx := context.Background()
	require.NotPanics(t, func() {
		_, err := s.Claim(ctx, "k", "fp", time.Minute)
		require.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.Contains(t, err.Error(), want)
		for name, err := range map[string]error{
			"Renew":    s.Renew(ctx, "k", "1", time.Minute),
			"Complete": s.Complete(ctx, "k", "1", idempotency.StoredOutcome{}, time.Minute),
			"Release":  s.Release(ctx, "k", "1"),
		} {
			require.ErrorIs(t, err, retry.ErrInvalidOption, name)
			assert.Contains(t, err.Error(), want, name)
		}
		assert.Zero(t, s.Len())
	})

	r, err := retry.New(retry.WithIdempotency(s, &retry.IdempotencyOptions{Key: "k"}))
	require.NoError(t, err)
	calls := 0
	require.NotPanics(t, func() {
		err = r.Do(ctx, func(context.Context) error { calls++; return nil })
	})
	assert.Zero(t, calls, "fn ran without idempotency")
	require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
	assert.Contains(t, err.Error(), want)
}

// TestStoreRefusesNilPointerClock: New cannot return an error, so a
// store given a nil *clock.Mock returns one that names Options.Clock from
// every method, rather than switching to real time in silence; the old
// code panicked in Claim, inside Do.
func TestStoreRefusesNilPointerClock(t *testing.T) {
	s := memstore.New(&memstore.Options{Clock: (*clock.Mock)(nil)})
	checkUnusable(t, s, "memstore: Options.Clock (*clock.Mock)(nil) is a nil pointer")
}

// TestStoreZeroValue: the zero Store, not made with New, says so instead
// of panicking on its nil clock and map (the old code).
func TestStoreZeroValue(t *testing.T) {
	checkUnusable(t, &memstore.Store{}, "memstore: a Store must be made with New")
}

// TestUnknownOutcome: a call cut while fn runs keeps the key (at most once
// and at least once), and a claim is renewed while fn outlives its lease.
// The lease is the 1s, fn runs 5s, on synctest's clock.
func TestUnknownOutcome(t *testing.T) {
	storetest.TestUnknownOutcome(t, storetest.UnknownOutcome{
		New:   func(*testing.T) idempotency.Store { return memstore.New(nil) },
		Run:   func(t *testing.T, f func(*testing.T)) { synctest.Test(t, f) },
		Lease: time.Second,
	})
}

// TestStoreClockOutOfRange: the store counts time in an int64 of
// nanoseconds from its clock's reading at New; a clock moved further than
// that range makes it fail closed instead of expiring every key at once.
func TestStoreClockOutOfRange(t *testing.T) {
	mock := clock.NewMock()
	s := memstore.New(&memstore.Options{Clock: mock})
	ctx := context.Background()
	cl, err := s.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	mock.Set(mock.Now().AddDate(300, 0, 0))
	_, err = s.Claim(ctx, "k2", "fp", time.Minute)
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "memstore: Options.Clock reads a time more than 292 years away")
	require.ErrorIs(t, s.Complete(ctx, "k", cl.Token, idempotency.StoredOutcome{}, time.Minute), retry.ErrInvalidOption)
	require.ErrorIs(t, s.Renew(ctx, "k", cl.Token, time.Minute), retry.ErrInvalidOption)
}

// TestStoreLongestLease: a lease or retention too long to add to the
// clock never ends, rather than wrapping round to the past.
func TestStoreLongestLease(t *testing.T) {
	mock := clock.NewMock()
	s := memstore.New(&memstore.Options{Clock: mock})
	ctx := context.Background()
	mock.Add(time.Hour)
	cl, err := s.Claim(ctx, "k", "fp", math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, cl.Status)
	mock.Add(100 * 365 * 24 * time.Hour)
	got, err := s.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimHeld, got.Status)
	require.NoError(t, s.Complete(ctx, "k", cl.Token, idempotency.StoredOutcome{}, math.MaxInt64))
	mock.Add(100 * 365 * 24 * time.Hour)
	got, err = s.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimCompleted, got.Status)
}
