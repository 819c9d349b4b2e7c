package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/pgstore/pgschema/pgschematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClaimCompleteReplay(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := context.Background()

	c, err := store.Claim(ctx, "k", "fp1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, c.Status)
	assert.Len(t, c.Token, 32)

	held, err := store.Claim(ctx, "k", "fp2", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: "fp1"}, held)

	require.NoError(t, store.Renew(ctx, "k", c.Token, time.Minute))
	rec := idempotency.StoredOutcome{Value: []byte(`{"id":7}`)}
	require.NoError(t, store.Complete(ctx, "k", c.Token, rec, time.Hour))

	done, err := store.Claim(ctx, "k", "fp2", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: "fp1", Outcome: rec}, done)

	// The token ended with the outcome.
	assert.ErrorIs(t, store.Renew(ctx, "k", c.Token, time.Minute), idempotency.ErrLeaseLost)
	assert.ErrorIs(t, store.Complete(ctx, "k", c.Token, idempotency.StoredOutcome{Value: []byte("other")}, time.Hour), idempotency.ErrLeaseLost)
	require.NoError(t, store.Release(ctx, "k", c.Token))
	again, err := store.Claim(ctx, "k", "fp1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, done, again, "a stale Complete or Release must not change the stored outcome")
}

func TestPermanentFailureRecord(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := context.Background()
	c, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	rec := idempotency.StoredOutcome{Permanent: true, Error: "card declined"}
	require.NoError(t, store.Complete(ctx, "k", c.Token, rec, time.Hour))

	got, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: "fp", Outcome: rec}, got)
}

func TestFencing(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := context.Background()
	c, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	const forged = "00000000000000000000000000000000"

	assert.ErrorIs(t, store.Renew(ctx, "k", forged, time.Minute), idempotency.ErrLeaseLost)
	assert.ErrorIs(t, store.Complete(ctx, "k", forged, idempotency.StoredOutcome{Value: []byte("x")}, time.Hour), idempotency.ErrLeaseLost)
	require.NoError(t, store.Release(ctx, "k", forged))
	assert.ErrorIs(t, store.Renew(ctx, "other", c.Token, time.Minute), idempotency.ErrLeaseLost, "a token holds only its own key")

	got, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: "fp"}, got, "forged tokens changed nothing")
}

func TestReleaseFreesKey(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := context.Background()
	c, err := store.Claim(ctx, "k", "fp1", time.Minute)
	require.NoError(t, err)
	require.NoError(t, store.Release(ctx, "k", c.Token))

	next, err := store.Claim(ctx, "k", "fp2", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, next.Status)
	assert.NotEqual(t, c.Token, next.Token)
	assert.ErrorIs(t, store.Renew(ctx, "k", c.Token, time.Minute), idempotency.ErrLeaseLost)
	require.NoError(t, store.Release(ctx, "k", c.Token), "releasing a lost claim is not an error")
	require.NoError(t, store.Renew(ctx, "k", next.Token, time.Minute), "and does not touch the new holder")
}

// TestLeaseExpiryTakeover measures leases on a mock clock, to the
// microsecond PostgreSQL keeps.
func TestLeaseExpiryTakeover(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	store, _, _ := newStore(t, &pgstore.Options{Clock: mock})
	ctx := context.Background()

	a, err := store.Claim(ctx, "k", "fp-a", 5*time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, a.Status)

	mock.Add(5*time.Minute - time.Microsecond)
	held, err := store.Claim(ctx, "k", "fp-b", 5*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: "fp-a"}, held, "just before the lease ends")

	mock.Add(time.Microsecond)
	b, err := store.Claim(ctx, "k", "fp-b", 5*time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, b.Status, "at the end of the lease")

	// The first holder woke up late: it is fenced off.
	assert.ErrorIs(t, store.Renew(ctx, "k", a.Token, time.Minute), idempotency.ErrLeaseLost)
	assert.ErrorIs(t, store.Complete(ctx, "k", a.Token, idempotency.StoredOutcome{Value: []byte("a")}, time.Hour), idempotency.ErrLeaseLost)
	require.NoError(t, store.Release(ctx, "k", a.Token))

	require.NoError(t, store.Complete(ctx, "k", b.Token, idempotency.StoredOutcome{Value: []byte("b")}, time.Hour))
	got, err := store.Claim(ctx, "k", "fp-b", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: "fp-b", Outcome: idempotency.StoredOutcome{Value: []byte("b")}}, got)
}

func TestRenewExtendsLease(t *testing.T) {
	mock := clock.NewMock()
	store, _, _ := newStore(t, &pgstore.Options{Clock: mock})
	ctx := context.Background()

	a, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	mock.Add(50 * time.Second)
	require.NoError(t, store.Renew(ctx, "k", a.Token, time.Minute))
	mock.Add(59 * time.Second) // 109s after the claim, 59s after the renewal
	held, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimHeld, held.Status)

	// Expired but not taken over: the holder still holds the key.
	mock.Add(time.Hour)
	require.NoError(t, store.Renew(ctx, "k", a.Token, time.Minute))
	held, err = store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimHeld, held.Status)
}

func TestRetentionExpiry(t *testing.T) {
	mock := clock.NewMock()
	store, _, _ := newStore(t, &pgstore.Options{Clock: mock})
	ctx := context.Background()

	a, err := store.Claim(ctx, "k", "fp-a", time.Minute)
	require.NoError(t, err)
	rec := idempotency.StoredOutcome{Value: []byte("v")}
	require.NoError(t, store.Complete(ctx, "k", a.Token, rec, 24*time.Hour))

	mock.Add(24*time.Hour - time.Microsecond)
	got, err := store.Claim(ctx, "k", "fp-b", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: "fp-a", Outcome: rec}, got)

	mock.Add(time.Microsecond)
	b, err := store.Claim(ctx, "k", "fp-b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, b.Status, "the key counts as new once the retention ends")
	held, err := store.Claim(ctx, "k", "fp-c", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: "fp-b"}, held, "the new claim stored its own fingerprint")
}

// TestServerClock checks expiry on PostgreSQL's now(), with leases so
// short that a brief poll sees them end.
func TestServerClock(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := context.Background()

	a, err := store.Claim(ctx, "lease", "fp", time.Hour)
	require.NoError(t, err)
	held, err := store.Claim(ctx, "lease", "fp", time.Hour)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimHeld, held.Status)
	require.NoError(t, store.Renew(ctx, "lease", a.Token, time.Millisecond))
	b := pollAcquired(t, store, "lease")
	assert.ErrorIs(t, store.Complete(ctx, "lease", a.Token, idempotency.StoredOutcome{}, time.Hour), idempotency.ErrLeaseLost)

	require.NoError(t, store.Complete(ctx, "lease", b.Token, idempotency.StoredOutcome{Value: []byte("v")}, time.Hour))
	done, err := store.Claim(ctx, "lease", "fp", time.Hour)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimCompleted, done.Status)

	c, err := store.Claim(ctx, "retention", "fp", time.Hour)
	require.NoError(t, err)
	require.NoError(t, store.Complete(ctx, "retention", c.Token, idempotency.StoredOutcome{Value: []byte("v")}, time.Millisecond))
	pollAcquired(t, store, "retention")
}

// pollAcquired claims key until it is acquired, for at most a second. It
// polls on the test's goroutine (not require.Eventually's), so that a
// failed Claim can stop the test.
func pollAcquired(t *testing.T, store *pgstore.Store, key string) idempotency.Claim {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		c, err := store.Claim(context.Background(), key, "fp", time.Hour)
		require.NoError(t, err)
		if c.Status == idempotency.ClaimAcquired {
			return c
		}
		require.True(t, time.Now().Before(deadline), "key %q still %v after a second", key, c.Status)
		time.Sleep(time.Millisecond)
	}
}

func TestAnyBytesInKeyAndFingerprint(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := context.Background()
	key, fp := "tenant\x00order\xff\xfe", "\x00\x01sha256\xc3\x28"

	c, err := store.Claim(ctx, key, fp, time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, c.Status)
	other, err := store.Claim(ctx, "tenant\x00order", fp, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimAcquired, other.Status, "a key is not confused with its prefix")

	held, err := store.Claim(ctx, key, "x", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, fp, held.Fingerprint)
	rec := idempotency.StoredOutcome{Value: []byte{0, 1, 2, 255}}
	require.NoError(t, store.Complete(ctx, key, c.Token, rec, time.Hour))
	done, err := store.Claim(ctx, key, "x", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fp, Outcome: rec}, done)
}

// TestConcurrentClaims races goroutines for the same keys: exactly one
// claim per key is acquired, and every other one sees the key held or
// completed with its fingerprint.
func TestConcurrentClaims(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := context.Background()
	const goroutines, keys = 16, 50
	var (
		mu       sync.Mutex
		acquired = map[string]int{}
		wg       sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			for k := range keys {
				key := "key-" + string(rune('a'+k%26)) + string(rune('a'+k/26))
				c, err := store.Claim(ctx, key, "fp", time.Minute)
				if !assert.NoError(t, err) {
					return
				}
				switch c.Status {
				case idempotency.ClaimAcquired:
					mu.Lock()
					acquired[key]++
					mu.Unlock()
					if g%2 == 0 {
						assert.NoError(t, store.Complete(ctx, key, c.Token, idempotency.StoredOutcome{Value: []byte(key)}, time.Hour))
					}
				case idempotency.ClaimCompleted:
					assert.Equal(t, []byte(key), c.Outcome.Value)
					assert.Equal(t, "fp", c.Fingerprint)
				default:
					assert.Equal(t, idempotency.ClaimHeld, c.Status)
					assert.Equal(t, "fp", c.Fingerprint)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, acquired, keys)
	for key, n := range acquired {
		assert.Equal(t, 1, n, key)
	}
}

func TestCleanupDeletesExpiredRows(t *testing.T) {
	mock := clock.NewMock()
	store, pool, _ := newStore(t, &pgstore.Options{Clock: mock})
	ctx := context.Background()
	claim := func(key string, lease time.Duration) idempotency.Claim {
		c, err := store.Claim(ctx, key, "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.ClaimAcquired, c.Status)
		return c
	}
	abandoned := claim("abandoned", time.Minute)
	claim("running", time.Hour)
	old := claim("old", time.Minute)
	require.NoError(t, store.Complete(ctx, "old", old.Token, idempotency.StoredOutcome{}, time.Minute))
	kept := claim("kept", time.Minute)
	require.NoError(t, store.Complete(ctx, "kept", kept.Token, idempotency.StoredOutcome{Value: []byte("v")}, time.Hour))

	mock.Add(time.Minute)
	n, err := store.Cleanup(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)

	var left []string
	rows, err := pool.Query(ctx, "SELECT convert_from(key, 'UTF8') FROM "+store.Table()+" ORDER BY key")
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		left = append(left, k)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"kept", "running"}, left)
	assert.ErrorIs(t, store.Complete(ctx, "abandoned", abandoned.Token, idempotency.StoredOutcome{}, time.Hour), idempotency.ErrLeaseLost)

	n, err = store.Cleanup(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
}

func TestCleanupBatches(t *testing.T) {
	store, pool, table := newStore(t, nil)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO `+table+` (key, fingerprint, completed, expires_at)
		SELECT ('k' || i)::bytea, 'fp', true, now() - interval '1 second' FROM generate_series(1, 2500) i`)
	require.NoError(t, err)
	n, err := store.Cleanup(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2500), n)
}

func TestInvalidDurations(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := context.Background()
	_, err := store.Claim(ctx, "k", "fp", 0)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.ErrorContains(t, err, "lease")
	assert.ErrorIs(t, store.Renew(ctx, "k", "t", -time.Second), retry.ErrInvalidOption)
	err = store.Complete(ctx, "k", "t", idempotency.StoredOutcome{}, -time.Second)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.ErrorContains(t, err, "retention")
}

func TestStoreDown(t *testing.T) {
	pool := downPool(t)
	store, err := pgstore.New(pool, nil)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = store.Claim(ctx, "k", "fp", time.Minute)
	require.Error(t, err)
	assert.NotErrorIs(t, err, idempotency.ErrLeaseLost)
	assert.ErrorContains(t, err, "pgstore: claim")
	assert.Error(t, store.Renew(ctx, "k", "t", time.Minute))
	assert.Error(t, store.Complete(ctx, "k", "t", idempotency.StoredOutcome{}, time.Minute))
	assert.Error(t, store.Release(ctx, "k", "t"))
	assert.Error(t, store.Migrate(ctx))
	_, err = store.Cleanup(ctx)
	assert.Error(t, err)
}

// TestLeaseNeverCutShort claims at an instant PostgreSQL cannot store
// exactly: the lease is rounded up, never down.
func TestLeaseNeverCutShort(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 2, 3, 4, 5, 1, time.UTC))
	store, _, _ := newStore(t, &pgstore.Options{Clock: mock})
	ctx := context.Background()

	_, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	mock.Add(time.Minute - time.Nanosecond)
	held, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimHeld, held.Status, "1ns before the lease ends")
	mock.Add(time.Microsecond + time.Nanosecond)
	next, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimAcquired, next.Status, "at most 1µs after it ends")
}

// TestClaimAfterARacingWrite holds another transaction's write to the
// key open while a Claim runs: the Claim's read cannot see it, and its
// insert waits for that transaction. Once it commits, the insert takes
// nothing and the Claim must read again and report the new holder; once
// it rolls back, the insert takes the key.
func TestClaimAfterARacingWrite(t *testing.T) {
	// Another caller's claim of a new key, and its takeover of an
	// expired one; %s is the table.
	const (
		racingInsert   = `INSERT INTO %s (key, fingerprint, token, expires_at) VALUES ($1, 'other', 'tok', now() + interval '1 hour')`
		racingTakeover = `UPDATE %s SET fingerprint = 'other', token = 'tok', expires_at = now() + interval '1 hour' WHERE key = $1`
	)
	for _, tc := range []struct {
		name   string
		before string // the row before the racing write ("": none)
		write  string // the racing write, $1 the key
		commit bool
		want   idempotency.ClaimStatus
	}{
		{"insert committed", "", racingInsert, true, idempotency.ClaimHeld},
		{"insert rolled back", "", racingInsert, false, idempotency.ClaimAcquired},
		{"takeover committed", "expired", racingTakeover, true, idempotency.ClaimHeld},
		{"takeover rolled back", "expired", racingTakeover, false, idempotency.ClaimAcquired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, pool, table := newStore(t, nil)
			url, _ := testURL()
			store, err := pgstore.New(pgschematest.AppPool(t, url, table), &pgstore.Options{Table: table})
			require.NoError(t, err)
			ctx := context.Background()
			quoted := pgx.Identifier{table}.Sanitize()
			key := []byte("k")
			if tc.before == "expired" {
				_, err := pool.Exec(ctx, `INSERT INTO `+quoted+` (key, fingerprint, token, expires_at)
VALUES ($1, 'old', 'old', now() - interval '1 second')`, key)
				require.NoError(t, err)
			}

			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, fmt.Sprintf(tc.write, quoted), key)
			require.NoError(t, err)

			claims := make(chan idempotency.Claim, 1)
			errs := make(chan error, 1)
			go func() {
				c, err := store.Claim(ctx, "k", "mine", time.Minute)
				claims <- c
				errs <- err
			}()
			assert.Len(t, pgschematest.LockWaits(t, pool, table, 1), 1, "the claim's insert waits for the racing write")
			if tc.commit {
				require.NoError(t, tx.Commit(ctx))
			} else {
				require.NoError(t, tx.Rollback(ctx))
			}
			c := <-claims
			require.NoError(t, <-errs)
			assert.Equal(t, tc.want, c.Status)
			if tc.want == idempotency.ClaimHeld {
				assert.Equal(t, "other", c.Fingerprint, "the holder's fingerprint, read after the insert took nothing")
				return
			}
			held, err := store.Claim(ctx, "k", "again", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: "mine"}, held)
			require.NoError(t, store.Complete(ctx, "k", c.Token, idempotency.StoredOutcome{Value: []byte("v")}, time.Hour))
		})
	}
}
