package redisstore_test

import (
	"context"
	"crypto/rand"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/idempotency"
)

// earlierProcess is a process running the store as it was up to commit
// d7d9a52, where Claim and Complete were Lua scripts (testdata), with
// 26-character tokens: what shares the keys with this store during a
// rolling upgrade.
type earlierProcess struct {
	t                           *testing.T
	c                           *redis.Client
	prefix                      string
	claimScript, completeScript *redis.Script
}

func newEarlierProcess(t *testing.T, c *redis.Client, prefix string) *earlierProcess {
	read := func(name string) *redis.Script {
		src, err := os.ReadFile("testdata/" + name)
		require.NoError(t, err)
		return redis.NewScript(string(src))
	}
	return &earlierProcess{t: t, c: c, prefix: prefix, claimScript: read("earlier-claim.lua"), completeScript: read("earlier-complete.lua")}
}

// claim returns "" when it claimed key under token, else the value found.
func (p *earlierProcess) claim(key, token string, lease time.Duration) string {
	v, err := p.claimScript.Run(context.Background(), p.c, []string{p.prefix + key}, "c"+token+"4:"+fp, lease.Milliseconds()).Text()
	require.NoError(p.t, err)
	return v
}

// complete reports whether it stored value "v" for key under token.
func (p *earlierProcess) complete(key, token string) bool {
	ok, err := p.completeScript.Run(context.Background(), p.c, []string{p.prefix + key}, token, "d", "1:v", long.Milliseconds(), rand.Text()).Bool()
	require.NoError(p.t, err)
	return ok
}

// TestRollingUpgrade: a process of the earlier version and this store
// share keys, each reading and fencing what the other wrote.
func TestRollingUpgrade(t *testing.T) {
	s, c, prefix := newStore(t)
	earlier := newEarlierProcess(t, c, prefix)
	ctx := context.Background()
	rec := idempotency.StoredOutcome{Value: []byte("v")}

	// Claimed and completed by the earlier process, read by this store.
	token := rand.Text()
	require.Empty(t, earlier.claim("old", token, long))
	assertClaim(t, s, "old", idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: fp})
	require.True(t, earlier.complete("old", token))
	assertClaim(t, s, "old", idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fp, Outcome: rec})

	// Claimed and completed by this store, read by the earlier process.
	cl, err := s.Claim(ctx, "new", fp, long)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, cl.Status)
	held := earlier.claim("new", rand.Text(), long)
	require.Len(t, held, 1+26+len("4:"+fp))
	assert.Equal(t, "c", held[:1], "held, as the earlier process reads it")
	assert.Equal(t, "4:"+fp, held[27:])
	assert.False(t, earlier.complete("new", rand.Text()), "fenced")
	require.NoError(t, s.Complete(ctx, "new", cl.Token, rec, long))
	done := earlier.claim("new", rand.Text(), long)
	require.Len(t, done, 1+26+len("4:"+fp+"1:v"))
	assert.Equal(t, "d", done[:1], "completed, as the earlier process reads it")
	assert.Equal(t, "4:"+fp+"1:v", done[27:])

	// An earlier claim whose lease lapsed: this store takes the key over,
	// and the earlier holder cannot overwrite the new claim.
	token = rand.Text()
	require.Empty(t, earlier.claim("lapsed", token, 5*time.Millisecond))
	eventually(t, "the 5ms lease to expire", func() bool {
		cl, err = s.Claim(ctx, "lapsed", fp, long)
		require.NoError(t, err)
		return cl.Status == idempotency.ClaimAcquired
	})
	assert.False(t, earlier.complete("lapsed", token))
	require.NoError(t, s.Complete(ctx, "lapsed", cl.Token, rec, long))
	assertClaim(t, s, "lapsed", idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fp, Outcome: rec})
}
