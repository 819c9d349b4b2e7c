package redislimit

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/steadfast-go/retry/overload"
)

// Rate is an [overload.RateLimit] shared by every process that gives the
// same Key: a GCRA kept in Redis by redis_rate, one EVALSHA round trip per
// admission. While Redis fails it decides by an in-memory Fallback, or
// refuses (FailClosed). Build one with [NewRate]; it is safe for
// concurrent use.
type Rate struct {
	limiter  *redis_rate.Limiter
	limit    redis_rate.Limit
	key      string         // Key, or Key+":" to put a partition after
	retries  *overload.Rate // this process's share of RetriesPerSecond; nil: no cap
	fallback *overload.Rate // nil when FailClosed
	o        settings

	// down is when, in Unix ns, to ask Redis again after a failure; 0
	// while it answers, so that a healthy admission pays one load.
	down atomic.Int64

	refused, fallbacks, errors atomic.Uint64
}

var _ overload.RateLimit = (*Rate)(nil)

// NewRate returns a Rate on client (a *redis.Client, *redis.ClusterClient
// or *redis.Ring, with ContextTimeoutEnabled set), without calling Redis.
// A nil client or an invalid option gives an error wrapping
// retry.ErrInvalidOption that names the problem.
func NewRate(client redis.UniversalClient, opts *RateOptions) (*Rate, error) {
	if err := checkClient(client); err != nil {
		return nil, err
	}
	o, err := opts.check()
	if err != nil {
		return nil, err
	}
	r := &Rate{limiter: redis_rate.NewLimiter(client), limit: o.limit, key: o.Key, fallback: o.Fallback, o: o}
	if o.Partitioned {
		r.key += ":"
	}
	if o.RetriesPerSecond > 0 {
		perSecond, burst := share(o.RetriesPerSecond, o.RetryBurst, o.FleetSize)
		if r.retries, err = r.local(perSecond, burst); err != nil {
			return nil, err
		}
	}
	if r.fallback == nil && !o.FailClosed {
		perSecond, burst := share(o.PerSecond, o.Burst, o.FleetSize)
		if r.fallback, err = r.local(perSecond, burst); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// local returns an in-memory rate, partitioned as r is.
func (r *Rate) local(perSecond float64, burst int) (*overload.Rate, error) {
	rate, err := overload.NewRate(overload.RateOptions{
		PerSecond: perSecond, Burst: burst, Partitioned: r.o.Partitioned, MaxPartitions: r.o.MaxPartitions,
	})
	if err != nil {
		return nil, invalid("this process's share: %v", err)
	}
	return rate, nil
}

// Admit admits attempt a of the call whose context is ctx, or refuses it
// with an error that matches overload.ErrRateLimited: a
// [*RateLimitedError] from Redis, or, while Redis fails, one that matches
// [ErrUnavailable] too. It costs at most one round trip to Redis.
func (r *Rate) Admit(ctx context.Context, a overload.Attempt) error {
	if r.retries != nil && a.Kind != overload.FirstAttempt && r.retries.Admit(ctx, a) != nil {
		r.refused.Add(1)
		return errRetriesLimited
	}
	if !r.askRedis() {
		return r.withoutRedis(ctx, a)
	}
	key := r.key
	if r.o.Partitioned {
		key += overload.PartitionOf(ctx)
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	res, err := r.limiter.Allow(rctx, key, r.limit)
	cancel()
	switch {
	case err != nil && ctx.Err() != nil:
		return r.withoutRedis(ctx, a) // the call's own end: it says nothing of Redis
	case err != nil:
		r.errors.Add(1)
		r.down.Store(time.Now().UnixNano() + int64(r.o.Recheck))
		return r.withoutRedis(ctx, a)
	}
	if r.down.Load() != 0 {
		r.down.Store(0)
	}
	if res.Allowed == 0 {
		r.refused.Add(1)
		return &RateLimitedError{RetryAfter: res.RetryAfter}
	}
	return nil
}

// askRedis says whether an admission asks Redis: always while it
// answers; after a failure, one admission once Recheck has passed.
func (r *Rate) askRedis() bool {
	down := r.down.Load()
	if down == 0 {
		return true
	}
	now := time.Now().UnixNano()
	return now >= down && r.down.CompareAndSwap(down, now+int64(r.o.Recheck))
}

// withoutRedis decides a by the Fallback, or refuses it when the Rate
// fails closed.
func (r *Rate) withoutRedis(ctx context.Context, a overload.Attempt) error {
	r.fallbacks.Add(1)
	if r.fallback == nil {
		r.refused.Add(1)
		return errFailClosed
	}
	if r.fallback.Admit(ctx, a) != nil {
		r.refused.Add(1)
		return errFallbackLimited
	}
	return nil
}

// Stats counts what a [Rate] decided since it was built.
type Stats struct {
	// Refused counts the refused attempts: by Redis, the retries' cap,
	// the Fallback, or FailClosed.
	Refused uint64
	// Fallbacks counts the attempts decided without Redis, by the
	// Fallback or FailClosed: a round trip failed, or Redis was being
	// left alone after one did (Recheck).
	Fallbacks uint64
	// Errors counts the round trips to Redis that failed or timed out,
	// aside from those that the call's own context ended.
	Errors uint64
}

// Stats returns the counts so far: a rising Fallbacks or Errors says that
// Redis is in trouble.
func (r *Rate) Stats() Stats {
	return Stats{Refused: r.refused.Load(), Fallbacks: r.fallbacks.Load(), Errors: r.errors.Load()}
}
