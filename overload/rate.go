package overload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry/internal/isnil"
)

// RateLimit admits attempts to a downstream at a rate: set it in
// retry.OverloadOptions, one per downstream, shared by every Retrier that
// calls it. [Rate] is the library's, per process; the redislimit module's
// is shared by every process through Redis. Implementations must be safe
// for concurrent use.
type RateLimit interface {
	// Admit lets attempt a of the call whose context is ctx go, or
	// returns an error that matches [ErrRateLimited]: it is refused, and
	// fn is not called. It never waits for room.
	Admit(ctx context.Context, a Attempt) error
}

// ErrRateLimited is matched (errors.Is) by the error of a call whose
// attempt a [RateLimit] refused: fn was not called. The call ends with
// retry.OutcomeRefused.
var ErrRateLimited = errors.New("rate limit reached")

// RateOptions configures a [Rate]. PerSecond must be set.
type RateOptions struct {
	// PerSecond is how many attempts may go per second, to each partition
	// when Partitioned: more than 0, at most 1e9.
	PerSecond float64
	// Burst is how many attempts may go at once after an idle spell, at
	// least 1. Default: a second's worth, PerSecond rounded up (as
	// redis_rate's PerSecond sets it).
	Burst int
	// RetriesPerSecond, if set, caps the retries and hedges alone, within
	// PerSecond, with RetryBurst (default: a second's worth), as AWS's
	// retry quota caps retries: first attempts keep the rest. 0: retries
	// share PerSecond with first attempts.
	RetriesPerSecond float64
	RetryBurst       int
	// Partitioned keeps a rate per partition ([WithPartition]) rather than
	// one for the whole downstream. Default: false.
	Partitioned bool
	// MaxPartitions bounds how many partitions have a rate of their own
	// at once; one more shares a single rate with any others past the
	// bound. Default: [DefaultMaxPartitions].
	MaxPartitions int
	// Clock times the rate, such as a *clock.Mock in tests (the same as
	// the Retrier's). Default: the real clock.
	Clock clock.Clock
}

// Rate is a [RateLimit] of one process: a GCRA (the generic cell rate
// algorithm, a token bucket kept as one time), so that an attempt it
// admits costs a clock reading and one atomic compare-and-swap, and a
// partition's state is one int64 that is dropped once it is idle. Build
// one with [NewRate] (the zero Rate refuses every attempt); it is safe
// for concurrent use.
type Rate struct {
	whole, retries gcra
	overflow       gcra // partitions past MaxPartitions
	retryOverflow  gcra
	parts          partitions[[2]int64] // a partition's gcra times: all, retries
	refused        atomic.Uint64
	clock          readings
	o              RateOptions
}

// gcra is a rate of attempts: each admitted one moves the theoretical
// arrival time, tat, on by interval; an attempt is refused if that would
// put tat more than window ahead of now.
type gcra struct {
	tat      atomic.Int64
	interval int64
	window   int64 // Burst intervals
}

// NewRate returns a Rate whose burst is all there. Invalid options give
// an error that names the problem.
func NewRate(o RateOptions) (*Rate, error) {
	if o.Burst == 0 {
		o.Burst = int(math.Ceil(o.PerSecond))
	}
	if o.RetryBurst == 0 && o.RetriesPerSecond > 0 {
		o.RetryBurst = int(math.Ceil(o.RetriesPerSecond))
	}
	if o.MaxPartitions == 0 {
		o.MaxPartitions = DefaultMaxPartitions
	}
	switch {
	case !(o.PerSecond > 0 && o.PerSecond <= 1e9):
		return nil, fmt.Errorf("overload: the rate's PerSecond %v must be in (0, 1e9]", o.PerSecond)
	case !(o.RetriesPerSecond >= 0 && o.RetriesPerSecond <= o.PerSecond):
		return nil, fmt.Errorf("overload: the rate's RetriesPerSecond %v must be in [0, PerSecond]", o.RetriesPerSecond)
	case o.Burst < 1 || o.RetryBurst < 0:
		return nil, fmt.Errorf("overload: the rate's Burst %d must be at least 1, and RetryBurst %d not negative", o.Burst, o.RetryBurst)
	case o.MaxPartitions < 0:
		return nil, fmt.Errorf("overload: the rate's MaxPartitions %d is negative", o.MaxPartitions)
	case o.Clock != nil && isnil.Is(o.Clock):
		return nil, fmt.Errorf("overload: Clock (%T)(nil) is a nil pointer, which cannot tell the time (leave Clock nil for real time)", o.Clock)
	}
	r := &Rate{o: o, clock: newReadings(o.Clock)}
	r.whole.set(o.PerSecond, o.Burst)
	r.overflow.set(o.PerSecond, o.Burst)
	if o.RetriesPerSecond > 0 {
		r.retries.set(o.RetriesPerSecond, o.RetryBurst)
		r.retryOverflow.set(o.RetriesPerSecond, o.RetryBurst)
	}
	r.parts.init(o.MaxPartitions)
	return r, nil
}

func (g *gcra) set(perSecond float64, burst int) {
	g.interval = max(int64(float64(time.Second)/perSecond), 1)
	g.window = g.interval * int64(burst)
}

// Admit admits a, or refuses it with [ErrRateLimited].
func (r *Rate) Admit(ctx context.Context, a Attempt) error {
	if r.whole.window == 0 {
		return ErrRateLimited // the zero Rate
	}
	now := r.clock.now()
	retry := a.Kind != FirstAttempt && r.retries.interval != 0
	var ok bool
	switch {
	case r.o.Partitioned:
		ok = r.admitPartition(PartitionOf(ctx), retry, now)
	case retry:
		ok = r.retries.admit(now) && r.whole.admit(now)
	default:
		ok = r.whole.admit(now)
	}
	if !ok {
		r.refused.Add(1)
		return ErrRateLimited
	}
	return nil
}

// admit takes one attempt's room at now, if there is room.
func (g *gcra) admit(now int64) bool {
	for {
		tat := g.tat.Load()
		next := max(tat, now) + g.interval
		if next-now > g.window {
			return false
		}
		if g.tat.CompareAndSwap(tat, next) {
			return true
		}
	}
}

// next is the tat after admitting one attempt at now, or false.
func (g *gcra) next(tat, now int64) (int64, bool) {
	next := max(tat, now) + g.interval
	return next, next-now <= g.window
}

// admitPartition admits an attempt of partition key at now, under its
// shard's lock.
func (r *Rate) admitPartition(key string, retry bool, now int64) bool {
	s := r.parts.shard(key)
	tats := s.m[key]
	all, ok := r.whole.next(tats[0], now)
	var retries int64
	if ok && retry {
		retries, ok = r.retries.next(tats[1], now)
	}
	if ok {
		tats[0] = all
		if retry {
			tats[1] = retries
		}
		if !s.put(key, tats, r.parts.perShard, func(t [2]int64) bool { return t[0] <= now && t[1] <= now }) {
			s.mu.Unlock()
			return (!retry || r.retryOverflow.admit(now)) && r.overflow.admit(now)
		}
	}
	s.mu.Unlock()
	return ok
}

// Refused returns how many attempts the rate has refused.
func (r *Rate) Refused() uint64 { return r.refused.Load() }
