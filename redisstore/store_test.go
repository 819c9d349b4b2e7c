package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/redisstore"
)

const (
	long = time.Hour // a lease or retention no test outlives
	fp   = "fp-1"
)

func TestNewRejectsBadInput(t *testing.T) {
	var nilClient *redis.Client
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	cases := map[string]struct {
		client redis.UniversalClient
		opts   *redisstore.Options
		msg    string
	}{
		"nil client":            {client: nil, msg: "the Redis client is nil"},
		"nil *redis.Client":     {client: nilClient, msg: "the Redis client is nil"},
		"nil ClusterClient":     {client: (*redis.ClusterClient)(nil), msg: "the Redis client is nil"},
		"nil client, bad opts":  {client: nil, opts: &redisstore.Options{Prefix: "{a}"}, msg: "the Redis client is nil"},
		"hash tag in prefix":    {client: client, opts: &redisstore.Options{Prefix: "{payments}:idem:"}, msg: `Options.Prefix "{payments}:idem:": the prefix must not contain '{' or '}'`},
		"open brace":            {client: client, opts: &redisstore.Options{Prefix: "a{"}, msg: "must not contain '{' or '}'"},
		"close brace":           {client: client, opts: &redisstore.Options{Prefix: "}a"}, msg: "must not contain '{' or '}'"},
		"NoPrefix and a prefix": {client: client, opts: &redisstore.Options{Prefix: "a:", NoPrefix: true}, msg: `Options.NoPrefix is set with Options.Prefix "a:"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := redisstore.New(tc.client, tc.opts)
			assert.Nil(t, s)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestBadDurationsAreRejectedWithoutWriting(t *testing.T) {
	s, c, prefix := newStore(t)
	ctx := context.Background()
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := s.Claim(ctx, "k", fp, d)
		require.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.Contains(t, err.Error(), "lease must be positive")
	}
	n, err := c.Exists(ctx, prefix+"k").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)

	cl, err := s.Claim(ctx, "k", fp, long)
	require.NoError(t, err)
	err = s.Renew(ctx, "k", cl.Token, 0)
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "renew: the lease must be positive")
	err = s.Complete(ctx, "k", cl.Token, idempotency.StoredOutcome{Value: []byte("v")}, -1)
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "complete: the retention must be positive")
	// Still claimed by cl: nothing was written.
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: fp})
}

// pxHook records the PX values, in whole milliseconds, that the store
// sends: a claim's SET's PX, and each script's one int64 argument
// (scripts.go).
type pxHook struct {
	mu sync.Mutex
	px []int64
}

func (*pxHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*pxHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *pxHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		var args []any
		switch cmd.Name() {
		case "evalsha", "eval":
			args = cmd.Args()[4:] // past the script, numkeys and the one key
		case "set":
			args = cmd.Args()[3:] // past the key and value
		}
		h.mu.Lock()
		for _, a := range args {
			if ms, ok := a.(int64); ok {
				h.px = append(h.px, ms)
			}
		}
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

// take returns the PX values recorded since the last take.
func (h *pxHook) take() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	px := h.px
	h.px = nil
	return px
}

// requirePX1 checks that the scripts sent since the last take all sent
// PX 1 (an EVALSHA that finds no cached script is sent again as EVAL).
func requirePX1(t *testing.T, h *pxHook, what string) {
	t.Helper()
	px := h.take()
	require.NotEmpty(t, px, "%s sent no PX", what)
	for _, ms := range px {
		require.Equal(t, int64(1), ms, "%s: PX sent to Redis", what)
	}
}

// A lease or retention below a millisecond is rounded up to PX 1: a
// truncated PX 0 would make Redis refuse the SET, or delete the key at
// once on PEXPIRE.
func TestSubMillisecondDurationsRoundUpToOneMillisecond(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, 500 * time.Microsecond, time.Millisecond - time.Nanosecond} {
		t.Run(d.String(), func(t *testing.T) {
			s, c, prefix := newStore(t)
			h := &pxHook{}
			c.AddHook(h)
			ctx := context.Background()

			cl, err := s.Claim(ctx, "claim", fp, d)
			require.NoError(t, err)
			require.Equal(t, idempotency.ClaimAcquired, cl.Status)
			requirePX1(t, h, "claim")

			cl, err = s.Claim(ctx, "renew", fp, long)
			require.NoError(t, err)
			h.take()
			require.NoError(t, s.Renew(ctx, "renew", cl.Token, d))
			requirePX1(t, h, "renew")

			cl, err = s.Claim(ctx, "complete", fp, long)
			require.NoError(t, err)
			h.take()
			require.NoError(t, s.Complete(ctx, "complete", cl.Token, idempotency.StoredOutcome{Value: []byte("v")}, d))
			requirePX1(t, h, "complete")

			// Redis holds each key for that millisecond, then drops it.
			eventually(t, "the 1ms expiries", func() bool {
				n, err := c.Exists(ctx, prefix+"claim", prefix+"renew", prefix+"complete").Result()
				require.NoError(t, err)
				return n == 0
			})
		})
	}
}

func TestClaimAcquiresFreshKeyWithLeaseAsTTL(t *testing.T) {
	s, c, prefix := newStore(t)
	ctx := context.Background()
	lease := 30 * time.Second

	cl, err := s.Claim(ctx, "k", fp, lease)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimAcquired, cl.Status)
	assert.Empty(t, cl.Fingerprint)
	v, err := c.Get(ctx, prefix+"k").Result()
	require.NoError(t, err)
	assert.Equal(t, v, cl.Token, "the token is the claimed value")
	assert.Regexp(t, "^c[A-Z2-7]{26}4:"+fp+"$", v)

	ttl, err := c.PTTL(ctx, prefix+"k").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, lease-5*time.Second)
	assert.LessOrEqual(t, ttl, lease)
	keys, err := c.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	assert.Equal(t, []string{prefix + "k"}, keys, "one Redis key per idempotency key")
}

func TestClaimOfHeldKeyReturnsStoredFingerprint(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	first, err := s.Claim(ctx, "k", fp, long)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, first.Status)

	got, err := s.Claim(ctx, "k", "another payload", long)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: fp}, got)
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: fp})
}

func TestCompleteStoresRecordForRetention(t *testing.T) {
	cases := map[string]idempotency.StoredOutcome{
		"value":             {Value: []byte(`{"id":42}`)},
		"empty value":       {Value: []byte{}},
		"nil value":         {},
		"binary value":      {Value: []byte("3:-\x00\xff:9")},
		"permanent":         {Permanent: true, Error: "card declined"},
		"permanent + value": {Permanent: true, Value: []byte("x"), Error: "12:-"},
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			s, c, prefix := newStore(t)
			ctx := context.Background()
			fingerprint := "fp:" + name + ":\x00"
			cl, err := s.Claim(ctx, "k", fingerprint, time.Minute)
			require.NoError(t, err)
			require.NoError(t, s.Complete(ctx, "k", cl.Token, rec, 2*time.Hour))

			ttl, err := c.PTTL(ctx, prefix+"k").Result()
			require.NoError(t, err)
			assert.Greater(t, ttl, time.Hour, "retention replaced the lease")
			got, err := s.Claim(ctx, "k", "other", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fingerprint, Outcome: rec}, got)
		})
	}
}

func TestRenewSetsLease(t *testing.T) {
	s, c, prefix := newStore(t)
	ctx := context.Background()
	cl, err := s.Claim(ctx, "k", fp, time.Second)
	require.NoError(t, err)

	require.NoError(t, s.Renew(ctx, "k", cl.Token, time.Hour))
	ttl, err := c.PTTL(ctx, prefix+"k").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 59*time.Minute)
	require.NoError(t, s.Renew(ctx, "k", cl.Token, time.Minute))
	ttl, err = c.PTTL(ctx, prefix+"k").Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, ttl, time.Minute, "renew sets the lease from now, it does not add")
	assert.Greater(t, ttl, 59*time.Second, "the key is still there, with the new lease")
}

func TestWrongTokenIsFenced(t *testing.T) {
	s, c, prefix := newStore(t)
	ctx := context.Background()
	cl, err := s.Claim(ctx, "k", fp, long)
	require.NoError(t, err)
	before, err := c.Get(ctx, prefix+"k").Result()
	require.NoError(t, err)

	// The same length with the last character changed: never the token.
	last := "X"
	if cl.Token[25:] == last {
		last = "Y"
	}
	for _, token := range []string{"", "short", cl.Token[:25] + last, cl.Token + "X"} {
		assert.ErrorIs(t, s.Renew(ctx, "k", token, long), idempotency.ErrLeaseLost, "renew %q", token)
		assert.ErrorIs(t, s.Complete(ctx, "k", token, idempotency.StoredOutcome{Value: []byte("stale")}, long), idempotency.ErrLeaseLost, "complete %q", token)
		assert.NoError(t, s.Release(ctx, "k", token), "release %q", token)
	}
	after, err := c.Get(ctx, prefix+"k").Result()
	require.NoError(t, err)
	assert.Equal(t, before, after, "nothing changed")
	assert.ErrorIs(t, s.Renew(ctx, "absent", cl.Token, long), idempotency.ErrLeaseLost)
	assert.ErrorIs(t, s.Complete(ctx, "absent", cl.Token, idempotency.StoredOutcome{}, long), idempotency.ErrLeaseLost)
	assert.NoError(t, s.Release(ctx, "absent", cl.Token))
	n, err := c.Exists(ctx, prefix+"absent").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
}

func TestReleaseFreesKeyAtOnce(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	cl, err := s.Claim(ctx, "k", fp, long)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, "k", cl.Token))

	again, err := s.Claim(ctx, "k", "second payload", long)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimAcquired, again.Status)
	assert.NotEqual(t, cl.Token, again.Token)
	// The first token is stale now: its release must not free the new claim.
	require.NoError(t, s.Release(ctx, "k", cl.Token))
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: "second payload"})
}

func TestReleaseAfterCompleteKeepsRecord(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	rec := idempotency.StoredOutcome{Value: []byte("done")}
	token := completeKey(t, s, "k", rec)
	require.NoError(t, s.Release(ctx, "k", token))
	assert.ErrorIs(t, s.Renew(ctx, "k", token, long), idempotency.ErrLeaseLost, "a completed key has no lease")
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fp, Outcome: rec})
}

// A second Complete under the same token is refused: the claim ended
// with the first.
func TestCompleteTwiceIsRefused(t *testing.T) {
	s, _, _ := newStore(t)
	rec := idempotency.StoredOutcome{Value: []byte("first")}
	token := completeKey(t, s, "k", rec)
	err := s.Complete(context.Background(), "k", token, idempotency.StoredOutcome{Value: []byte("second")}, long)
	assert.ErrorIs(t, err, idempotency.ErrLeaseLost)
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fp, Outcome: rec})
}

// completeKey claims key under fp, completes it with rec and returns the
// claim's token.
func completeKey(t *testing.T, s *redisstore.Store, key string, rec idempotency.StoredOutcome) string {
	t.Helper()
	ctx := context.Background()
	cl, err := s.Claim(ctx, key, fp, long)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, cl.Status)
	require.NoError(t, s.Complete(ctx, key, cl.Token, rec, long))
	return cl.Token
}

// assertClaim claims key under fp and checks what the store found.
func assertClaim(t *testing.T, s *redisstore.Store, key string, want idempotency.Claim) {
	t.Helper()
	got, err := s.Claim(context.Background(), key, fp, long)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// resendHook sends every command of the store's (SET, EVALSHA) twice and
// keeps the second reply, as go-redis does when the reply to the first
// send is lost.
type resendHook struct{}

func (resendHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (resendHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (resendHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "set" {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil && err != redis.Nil { // nil: a SET NX that claimed
			return err
		}
		return next(ctx, cmd)
	}
}

func TestResentCommandsKeepTheirMeaning(t *testing.T) {
	s, c, prefix := newStore(t)
	ctx := context.Background()
	// Load the scripts so that every call is an EVALSHA.
	warm, err := s.Claim(ctx, "warm", fp, long)
	require.NoError(t, err)
	require.NoError(t, s.Renew(ctx, "warm", warm.Token, long))
	require.NoError(t, s.Complete(ctx, "warm", warm.Token, idempotency.StoredOutcome{}, long))
	require.NoError(t, s.Release(ctx, "warm", warm.Token))

	c.AddHook(resendHook{})
	cl, err := s.Claim(ctx, "k", fp, long)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, cl.Status, "the re-sent claim finds its own token")
	require.NoError(t, s.Renew(ctx, "k", cl.Token, long))
	rec := idempotency.StoredOutcome{Value: []byte("v")}
	require.NoError(t, s.Complete(ctx, "k", cl.Token, rec, long))
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fp, Outcome: rec})

	other, err := s.Claim(ctx, "k2", fp, long)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, "k2", other.Token))
	n, err := c.Exists(ctx, prefix+"k2").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
}

// TestClaimOverRESP2: a client speaking RESP2 gets a free key's null as
// $-1, not RESP3's _, and the claim reads it without sending again.
func TestClaimOverRESP2(t *testing.T) {
	_, c, prefix := newStore(t)
	addr, _ := redisAddr()
	resp2 := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { _ = resp2.Close() })
	sets := &commandCounter{name: "set"}
	resp2.AddHook(sets)
	s, err := redisstore.New(resp2, &redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	ctx := context.Background()

	cl, err := s.Claim(ctx, "k", fp, long)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, cl.Status)
	require.Equal(t, int64(1), sets.n.Load(), "one SET: the reply read as it came")
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: fp})
	rec := idempotency.StoredOutcome{Value: []byte("v")}
	require.NoError(t, s.Complete(ctx, "k", cl.Token, rec, long))
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fp, Outcome: rec})
	n, err := c.Exists(ctx, prefix+"k").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}

func TestLeaseExpiryLetsAnotherCallerTakeOver(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	stale, err := s.Claim(ctx, "k", fp, 5*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, stale.Status)

	var fresh idempotency.Claim
	eventually(t, "the 5ms lease to expire", func() bool {
		fresh, err = s.Claim(ctx, "k", "fp-2", long)
		require.NoError(t, err)
		if fresh.Status != idempotency.ClaimAcquired {
			require.Equal(t, idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: fp}, fresh)
		}
		return fresh.Status == idempotency.ClaimAcquired
	})

	// The stale holder is fenced off: it can neither renew, complete nor
	// release the new holder's claim.
	assert.ErrorIs(t, s.Renew(ctx, "k", stale.Token, long), idempotency.ErrLeaseLost)
	assert.ErrorIs(t, s.Complete(ctx, "k", stale.Token, idempotency.StoredOutcome{Value: []byte("stale")}, long), idempotency.ErrLeaseLost)
	require.NoError(t, s.Release(ctx, "k", stale.Token))
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: "fp-2"})

	rec := idempotency.StoredOutcome{Value: []byte("fresh")}
	require.NoError(t, s.Complete(ctx, "k", fresh.Token, rec, long))
	assertClaim(t, s, "k", idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: "fp-2", Outcome: rec})
}

func TestRetentionExpiryFreesKey(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	cl, err := s.Claim(ctx, "k", fp, long)
	require.NoError(t, err)
	rec := idempotency.StoredOutcome{Value: []byte("v")}
	require.NoError(t, s.Complete(ctx, "k", cl.Token, rec, 5*time.Millisecond))

	eventually(t, "the 5ms retention to expire", func() bool {
		got, err := s.Claim(ctx, "k", "fp-2", long)
		require.NoError(t, err)
		if got.Status != idempotency.ClaimAcquired {
			require.Equal(t, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fp, Outcome: rec}, got)
		}
		return got.Status == idempotency.ClaimAcquired
	})
}

func TestConcurrentClaimsAcquireOnce(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	const callers = 64
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[idempotency.ClaimStatus]int{}
		errs     []error
	)
	start := make(chan struct{})
	for range callers {
		wg.Go(func() {
			<-start
			cl, err := s.Claim(ctx, "k", fp, long)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			statuses[cl.Status]++
		})
	}
	close(start)
	wg.Wait()
	require.Empty(t, errs)
	assert.Equal(t, map[idempotency.ClaimStatus]int{idempotency.ClaimAcquired: 1, idempotency.ClaimHeld: callers - 1}, statuses)
}

func TestPrefixesKeepStoresApart(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	base := testPrefix(t, c)
	a, err := redisstore.New(c, &redisstore.Options{Prefix: base + "a:"})
	require.NoError(t, err)
	b, err := redisstore.New(c, &redisstore.Options{Prefix: base + "b:"})
	require.NoError(t, err)

	ca, err := a.Claim(ctx, "k", fp, long)
	require.NoError(t, err)
	cb, err := b.Claim(ctx, "k", fp, long)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimAcquired, ca.Status)
	assert.Equal(t, idempotency.ClaimAcquired, cb.Status)
	for _, p := range []string{"a:", "b:"} {
		keys, err := c.Keys(ctx, base+p+"*").Result()
		require.NoError(t, err)
		assert.Equal(t, []string{base + p + "k"}, keys)
	}
}

// TestDefaultPrefix: a nil *Options, the zero Options and Prefix "" all
// store key k under DefaultPrefix+k.
func TestDefaultPrefix(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	for name, opts := range map[string]*redisstore.Options{"nil": nil, "zero": {}} {
		s, err := redisstore.New(c, opts)
		require.NoError(t, err, name)
		key := testPrefix(t, c) // unique, and the cleanup removes DefaultPrefix+key too
		t.Cleanup(func() { c.Del(context.Background(), redisstore.DefaultPrefix+key) })

		cl, err := s.Claim(ctx, key, fp, long)
		require.NoError(t, err, name)
		require.Equal(t, idempotency.ClaimAcquired, cl.Status, name)
		n, err := c.Exists(ctx, redisstore.DefaultPrefix+key).Result()
		require.NoError(t, err, name)
		assert.Equal(t, int64(1), n, name)
	}
}

// TestNoPrefix: Options.NoPrefix stores key k under k itself.
func TestNoPrefix(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	s, err := redisstore.New(c, &redisstore.Options{NoPrefix: true})
	require.NoError(t, err)
	key := testPrefix(t, c) + "bare" // unique, and the cleanup removes it

	cl, err := s.Claim(ctx, key, fp, long)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, cl.Status)
	n, err := c.Exists(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the Redis key is the idempotency key")
	n, err = c.Exists(ctx, redisstore.DefaultPrefix+key).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing under DefaultPrefix")
	require.NoError(t, s.Release(ctx, key, cl.Token))
}

func TestForeignValueIsAnErrorNotAClaim(t *testing.T) {
	s, c, prefix := newStore(t)
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, prefix+"str", "not ours", 0).Err())
	require.NoError(t, c.HSet(ctx, prefix+"hash", "f", "v").Err())

	_, err := s.Claim(ctx, "str", fp, long)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot read")
	_, err = s.Claim(ctx, "hash", fp, long)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WRONGTYPE")
	v, err := c.Get(ctx, prefix+"str").Result()
	require.NoError(t, err)
	assert.Equal(t, "not ours", v, "left alone")
}

func TestUnreachableServerGivesErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	s, err := redisstore.New(c, nil)
	require.NoError(t, err)
	ctx := context.Background()

	_, err = s.Claim(ctx, "k", fp, long)
	assertStoreError(t, "redisstore: claim: ", err)
	token := "c" + rand.Text() + "4:" + fp // as Claim hands them out: the claimed value
	assertStoreError(t, "redisstore: renew: ", s.Renew(ctx, "k", token, long))
	assertStoreError(t, "redisstore: complete: ", s.Complete(ctx, "k", token, idempotency.StoredOutcome{}, long))
	assertStoreError(t, "redisstore: release: ", s.Release(ctx, "k", token))
}

func assertStoreError(t *testing.T, prefix string, err error) {
	t.Helper()
	require.Error(t, err)
	assert.False(t, errors.Is(err, idempotency.ErrLeaseLost), "an outage is not a lost lease: %v", err)
	assert.Contains(t, err.Error(), prefix)
	assert.Contains(t, err.Error(), "connection refused")
}

func TestCancelledContext(t *testing.T) {
	s, c, prefix := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Claim(ctx, "k", fp, long)
	require.ErrorIs(t, err, context.Canceled)
	n, err := c.Exists(context.Background(), prefix+"k").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
}
