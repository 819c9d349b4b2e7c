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
// figures.
package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"
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
	client  redis.UniversalClient
	prefix  string
	scripts scripts
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

// Claim implements [idempotency.Store]: one script call that claims
// a free key with SET NX PX or returns what the key holds.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (idempotency.Claim, error) {
	ms, err := millis("claim", "lease", lease)
	if err != nil {
		return idempotency.Claim{}, err
	}
	token := rand.Text()
	v, err := s.scripts.claim.Run(ctx, s.client, []string{s.prefix + key}, encodeClaim(token, fingerprint), ms).Text()
	if err != nil {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	if v == "" {
		return idempotency.Claim{Status: idempotency.ClaimAcquired, Token: token}, nil
	}
	d, err := decode(v)
	if err != nil {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	switch {
	case d.state != stateClaimed:
		return idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: d.fingerprint, Outcome: d.record}, nil
	case d.token == token:
		// Our own claim: the client re-sent the script after losing the
		// reply to the first send, which had claimed the key.
		return idempotency.Claim{Status: idempotency.ClaimAcquired, Token: token}, nil
	default:
		return idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: d.fingerprint}, nil
	}
}

// Renew implements [idempotency.Store]: it sets the key's PX to lease
// if token still holds the claim, and returns idempotency.ErrLeaseLost if not.
func (s *Store) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	ms, err := millis("renew", "lease", lease)
	if err != nil {
		return err
	}
	ok, err := s.scripts.renew.Run(ctx, s.client, []string{s.prefix + key}, token, ms).Bool()
	if err != nil {
		return fmt.Errorf("redisstore: renew: %w", err)
	}
	if !ok {
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
	state, suffix := encodeOutcome(rec)
	id := rand.Text()
	ok, err := s.scripts.complete.Run(ctx, s.client, []string{s.prefix + key}, token, state, suffix, ms, id).Bool()
	if err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	if !ok {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// Release implements [idempotency.Store]: it deletes the key if
// token still holds the claim, and does nothing otherwise.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := s.scripts.release.Run(ctx, s.client, []string{s.prefix + key}, token).Err(); err != nil {
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
