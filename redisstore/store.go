// Package redisstore is a Redis-backed [idempotency.Store], so that
// idempotent calls made with github.com/steadfast-go/retry run their work
// once across every process sharing a Redis server or cluster.
//
// Each idempotency key is one Redis string holding the claim or the final
// outcome. Leases and retention are the key's PX expiry, measured by the
// Redis server, so an abandoned claim frees itself and an old outcome
// disappears without any sweeper. Every operation is one atomic command or
// Lua script on that single key, so the store works unchanged on Redis
// Cluster.
//
// It needs Redis 7.0 or later (or a server that takes SET with both NX
// and GET, such as Valkey 7.2): a claim is the native SET key value NX GET PX
// lease, which claims a free key or returns what it holds. An older server
// refuses it, and Claim returns an error saying so. Complete, Renew and
// Release are short Lua scripts that compare the key's value with the
// claim's token, since Redis 7 has no native compare-and-set.
//
// # Errors
//
// Errors from Redis (connection refused, timeout, a cancelled context)
// are returned wrapped with the operation's name; retry.Do treats them as
// the store being unavailable. go-redis re-sends a command whose reply was
// lost (Options.MaxRetries); every method gives the same answer whether
// its command ran once or twice.
//
// # Cost
//
// A first-time key costs two round trips (claim, complete), a replay one,
// and each retry one more (the lease renewal). BENCHMARKS.md has the
// figures beside raw SETs and GETs.
//
// # Upgrading
//
// The values are laid out as the store has always written them, so
// processes of this version and of earlier ones, which claimed with a
// script, can share keys during a rolling upgrade: each reads and fences
// the other's claims.
package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
)

// Store is an [idempotency.Store] on Redis. Build one with [New]; the
// zero value is not usable. It is safe for concurrent use by goroutines
// and processes, and safe against go-redis re-sending a command (see
// Errors in the package doc).
type Store struct {
	client           redis.UniversalClient
	prefix           string
	scripts          scripts
	lease, retention boxedMillis
}

var _ idempotency.Store = (*Store)(nil)

// New returns a Store that keeps its keys on client (a *redis.Client,
// *redis.ClusterClient or *redis.Ring), without calling Redis; a nil opts
// gives the defaults. A nil client or an invalid option gives an error
// wrapping retry.ErrInvalidOption that names the problem.
func New(client redis.UniversalClient, opts *Options) (*Store, error) {
	if isNil(client) {
		return nil, invalid("the Redis client is nil")
	}
	prefix, err := opts.prefix()
	if err != nil {
		return nil, err
	}
	return &Store{client: client, prefix: prefix, scripts: newScripts()}, nil
}

// isNil reports whether client is nil, as an interface or as one of
// go-redis's own client pointers.
func isNil(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// Claim implements [idempotency.Store] with one native command, SET key
// claim NX GET PX lease (Redis 7.0 or later): it claims a free key, or
// returns what the key holds and changes nothing. The claim's Token is
// the value it wrote, which the scripts of Renew, Complete and Release
// compare with the key's.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (idempotency.Claim, error) {
	ms, err := millis("claim", "lease", lease)
	if err != nil {
		return idempotency.Claim{}, err
	}
	c := &claimArgs{}
	redisKey, value := claimKey(s.prefix, key, fingerprint)
	c.value = value
	c.args = [7]any{"set", redisKey, &c.value, "nx", "get", "px", s.lease.box(ms)}
	// Read raw: go-redis treats a null reply, a free key's, as an error,
	// and classifies it for a retry at some 17 allocations a claim.
	cmd := redis.NewRawCmd(ctx, c.args[:]...)
	_ = s.client.Process(ctx, cmd)
	raw, err := cmd.Result()
	if err != nil {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	found, free, ok := readBulk(raw)
	if !ok {
		return s.claimAgain(ctx, c, fingerprint)
	}
	if free {
		return idempotency.Claim{Status: idempotency.ClaimAcquired, Token: value}, nil
	}
	return claimFound(found, value, fingerprint)
}

// claimAgain sends a claim again whose first send had an error reply (a
// cluster redirect, a server loading its data, a server older than 7.0),
// which wrote nothing, as a command go-redis reads: it acts on the error
// as on any other command's (it follows a redirect, retries a loading
// server), and returns it.
func (s *Store) claimAgain(ctx context.Context, c *claimArgs, fingerprint string) (idempotency.Claim, error) {
	cmd := redis.NewStringCmd(ctx, c.args[:]...)
	_ = s.client.Process(ctx, cmd)
	found, err := cmd.Result()
	switch {
	case err == redis.Nil:
		return idempotency.Claim{Status: idempotency.ClaimAcquired, Token: c.value}, nil
	case err != nil && redis.HasErrorPrefix(err, "ERR syntax error"):
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: the server does not take SET with both NX and GET; the store needs Redis 7.0 or later: %w", err)
	case err != nil:
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	return claimFound([]byte(found), c.value, fingerprint)
}

// claimFound is the claim of a key that held found when the claim wrote
// value. The outcome's Value shares found's memory.
func claimFound(found []byte, value, fingerprint string) (idempotency.Claim, error) {
	if string(found) == value {
		// Our own claim: the client re-sent the command after losing the
		// reply to the first send, which had claimed the key.
		return idempotency.Claim{Status: idempotency.ClaimAcquired, Token: value}, nil
	}
	d, err := decode(found)
	if err != nil {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	if string(d.fingerprint) != fingerprint {
		fingerprint = string(d.fingerprint)
	}
	if d.state == stateClaimed {
		return idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: fingerprint}, nil
	}
	return idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fingerprint, Outcome: d.record}, nil
}

// claimArgs are the arguments of a claim's SET, its value passed as a
// pointer to the field here to save an allocation (see scriptArgs).
type claimArgs struct {
	args  [7]any
	value string
}

// Renew implements [idempotency.Store]: it sets the key's PX to lease
// if token still holds the claim, and returns idempotency.ErrLeaseLost if not.
func (s *Store) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	ms, err := millis("renew", "lease", lease)
	if err != nil {
		return err
	}
	a := &scriptArgs{token: token}
	a.args[3], a.args[4], a.args[5] = s.prefix+key, &a.token, s.lease.box(ms)
	held, err := run(ctx, s.client, s.scripts.renew, a, 6)
	if err != nil {
		return fmt.Errorf("redisstore: renew: %w", err)
	}
	if held == 0 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// Complete implements [idempotency.Store]: it replaces the claim by
// rec, kept for retention (the key's new PX), if token still holds the
// claim, and returns idempotency.ErrLeaseLost if not.
func (s *Store) Complete(ctx context.Context, key, token string, rec idempotency.StoredOutcome, retention time.Duration) error {
	ms, err := millis("complete", "retention", retention)
	if err != nil {
		return err
	}
	redisKey, value, ok := completeKey(s.prefix, key, token, rec)
	if !ok {
		return idempotency.ErrLeaseLost // not a token of this store's: it holds no key
	}
	a := &scriptArgs{token: token, value: value}
	a.args[3], a.args[4], a.args[5], a.args[6] = redisKey, &a.token, &a.value, s.retention.box(ms)
	held, err := run(ctx, s.client, s.scripts.complete, a, 7)
	if err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	if held == 0 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// Release implements [idempotency.Store]: it deletes the key if
// token still holds the claim, and does nothing otherwise.
func (s *Store) Release(ctx context.Context, key, token string) error {
	a := &scriptArgs{token: token}
	a.args[3], a.args[4] = s.prefix+key, &a.token
	if _, err := run(ctx, s.client, s.scripts.release, a, 5); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	return nil
}

// millis converts d to whole milliseconds for PX, rounding up so that a
// sub-millisecond duration still gives a lease.
func millis(op, what string, d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, fmt.Errorf("%w: redisstore: %s: the %s must be positive, got %v", retry.ErrInvalidOption, op, what, d)
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return int64(ms), nil
}

// boxedMillis keeps the last PX it boxed, so that a store whose lease or
// retention does not change boxes it once rather than on every call.
type boxedMillis struct {
	last atomic.Pointer[msBox]
}

type msBox struct {
	ms  int64
	box any
}

// box returns ms as an interface value, boxed anew only when it changed.
func (b *boxedMillis) box(ms int64) any {
	if last := b.last.Load(); last != nil && last.ms == ms {
		return last.box
	}
	last := &msBox{ms: ms, box: ms}
	b.last.Store(last)
	return last.box
}
