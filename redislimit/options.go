package redislimit

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// The defaults and bounds of [RateOptions].
const (
	// DefaultTimeout bounds a round trip to Redis when RateOptions.Timeout
	// is 0: a few times a healthy round trip within a data centre, small
	// enough that an attempt barely waits for a Redis that hangs.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultRecheck is how long a [Rate] leaves Redis alone after a
	// failed round trip when RateOptions.Recheck is 0.
	DefaultRecheck = time.Second
	// MinPerSecond and MaxPerSecond bound RateOptions.PerSecond. The
	// script keeps time as float seconds, precise to about 0.1µs.
	MinPerSecond = 1e-6
	MaxPerSecond = 1e6
)

// RateOptions configures a [Rate]. Key and PerSecond must be set; every
// process that shares the limit gives the same Key, PerSecond and Burst.
type RateOptions struct {
	// Key names the downstream: the limit's Redis key is "rate:"+Key
	// (redis_rate's prefix), a partition's "rate:"+Key+":"+partition.
	// Required; no '{' or '}': a Redis Cluster hash tag would put every
	// partition's key in one slot.
	Key string
	// PerSecond is how many attempts the whole fleet may make per
	// second, to each partition when Partitioned: in [MinPerSecond,
	// MaxPerSecond]. A whole number is redis_rate.PerSecond's Limit.
	PerSecond float64
	// Burst is how many attempts may go at once after an idle spell, at
	// least 1. Default: a second's worth, PerSecond rounded up, as
	// redis_rate.PerSecond sets it.
	Burst int
	// RetriesPerSecond, if set, caps the retries and hedges alone within
	// PerSecond, as overload.RateOptions does; each process keeps its
	// share, RetriesPerSecond/FleetSize, in memory, so that an admission
	// stays one round trip. 0: retries share PerSecond with first ones.
	RetriesPerSecond float64
	// RetryBurst is the burst of the retries' cap, split by FleetSize as
	// RetriesPerSecond is. Default: a second's worth.
	RetryBurst int
	// Partitioned keeps a limit per partition ([overload.WithPartition]),
	// each its own Redis key, rather than one for the downstream. The
	// partition is never written in an error or a log. Default: false.
	Partitioned bool
	// MaxPartitions bounds the partitions that the in-memory limits (the
	// Fallback and the retries' cap) keep state for, as in
	// overload.RateOptions. Default: [overload.DefaultMaxPartitions].
	MaxPartitions int
	// FleetSize is how many processes share the limit: while Redis is
	// unreachable the default Fallback gives each PerSecond/FleetSize
	// (and Burst/FleetSize, rounded up). Default: 1, so that each
	// process alone may then use the whole limit (fail open): set it.
	FleetSize int
	// Fallback decides the attempts while Redis is unreachable (fail
	// open). Default: an overload.Rate of this process's share, see
	// FleetSize. It must be nil when FailClosed is set.
	Fallback *overload.Rate
	// FailClosed refuses every attempt while Redis is unreachable,
	// instead of deciding them by the Fallback. Default: false, fail
	// open to the Fallback.
	FailClosed bool
	// Timeout bounds each round trip to Redis; one that takes longer
	// counts as Redis unreachable. At least 1 ms. Default:
	// [DefaultTimeout].
	Timeout time.Duration
	// Recheck is how long the Rate decides by the Fallback alone after a
	// round trip failed; then one admission asks Redis again, the others
	// going on with the Fallback until it answers. At least 1 ms.
	// Default: [DefaultRecheck].
	Recheck time.Duration
}

// settings are the options of a Rate once checked, defaults applied.
type settings struct {
	RateOptions
	limit redis_rate.Limit
}

// check applies the defaults to o and returns them, or an error wrapping
// retry.ErrInvalidOption that names the problem.
func (o *RateOptions) check() (settings, error) {
	if o == nil {
		return settings{}, invalid("the options are nil: set at least Key and PerSecond")
	}
	s := settings{RateOptions: *o}
	if s.Burst == 0 && s.PerSecond > 0 && s.PerSecond <= MaxPerSecond {
		s.Burst = int(math.Ceil(s.PerSecond))
	}
	if s.RetryBurst == 0 && s.RetriesPerSecond > 0 {
		s.RetryBurst = int(math.Ceil(s.RetriesPerSecond))
	}
	if s.FleetSize == 0 {
		s.FleetSize = 1
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.Recheck == 0 {
		s.Recheck = DefaultRecheck
	}
	switch {
	case s.Key == "":
		return s, invalid("Key is empty: name the downstream, the same in every process that shares the limit")
	case strings.ContainsAny(s.Key, "{}"):
		return s, invalid("Key contains '{' or '}': a Redis Cluster hash tag would put every partition's key in one slot")
	case !(s.PerSecond >= MinPerSecond && s.PerSecond <= MaxPerSecond):
		return s, invalid("PerSecond %v must be in [%v, %v]", s.PerSecond, MinPerSecond, MaxPerSecond)
	case s.Burst < 1:
		return s, invalid("Burst %d must be at least 1", s.Burst)
	case !(s.RetriesPerSecond >= 0 && s.RetriesPerSecond <= s.PerSecond):
		return s, invalid("RetriesPerSecond %v must be in [0, PerSecond]", s.RetriesPerSecond)
	case s.RetryBurst < 0:
		return s, invalid("RetryBurst %d is negative", s.RetryBurst)
	case s.MaxPartitions < 0:
		return s, invalid("MaxPartitions %d is negative", s.MaxPartitions)
	case s.FleetSize < 0:
		return s, invalid("FleetSize %d is negative", s.FleetSize)
	case s.FailClosed && s.Fallback != nil:
		return s, invalid("Fallback is set with FailClosed, which uses none: set one or the other")
	case s.Timeout < time.Millisecond:
		return s, invalid("Timeout %v is below 1ms, less than a round trip to Redis: is it in the unit you meant?", s.Timeout)
	case s.Recheck < time.Millisecond:
		return s, invalid("Recheck %v is below 1ms: is it in the unit you meant?", s.Recheck)
	}
	s.limit = limitOf(s.PerSecond, s.Burst)
	return s, nil
}

// limitOf is redis_rate's Limit for perSecond: the same as
// redis_rate.PerSecond for a whole number, else one attempt per period.
func limitOf(perSecond float64, burst int) redis_rate.Limit {
	if perSecond == math.Trunc(perSecond) {
		return redis_rate.Limit{Rate: int(perSecond), Period: time.Second, Burst: burst}
	}
	return redis_rate.Limit{Rate: 1, Period: time.Duration(math.Round(float64(time.Second) / perSecond)), Burst: burst}
}

// share is a process's share of a fleet's rate and burst.
func share(perSecond float64, burst, fleet int) (float64, int) {
	return perSecond / float64(fleet), max(1, (burst+fleet-1)/fleet)
}

// checkClient returns an error wrapping retry.ErrInvalidOption if client
// is nil, or is one of go-redis's clients that ignores context deadlines:
// no Timeout could then bound a round trip.
func checkClient(client redis.UniversalClient) error {
	var contextTimeouts bool
	switch c := client.(type) {
	case nil:
		return invalid("the Redis client is nil")
	case *redis.Client:
		if c == nil {
			return invalid("the Redis client is nil")
		}
		contextTimeouts = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		if c == nil {
			return invalid("the Redis client is nil")
		}
		contextTimeouts = c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		if c == nil {
			return invalid("the Redis client is nil")
		}
		contextTimeouts = c.Options().ContextTimeoutEnabled
	default:
		return nil // another implementation: its own business
	}
	if !contextTimeouts {
		return invalid("the Redis client's ContextTimeoutEnabled is false, so go-redis would ignore the Timeout and wait for its ReadTimeout: set it")
	}
	return nil
}

// invalid returns an error wrapping retry.ErrInvalidOption that names the
// problem.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: redislimit: "+format, append([]any{retry.ErrInvalidOption}, args...)...)
}
