package redislimit

import (
	"errors"
	"time"

	"github.com/steadfast-go/retry/overload"
)

// ErrUnavailable is matched (errors.Is) by the refusal of an attempt that
// a [Rate] decided without Redis, which had failed: by the Fallback, or
// at once under FailClosed. Such a refusal matches
// overload.ErrRateLimited too.
var ErrUnavailable = errors.New("redislimit: Redis unavailable")

// RateLimitedError is the refusal of an attempt by the fleet's limit in
// Redis. It matches overload.ErrRateLimited (errors.Is); errors.As gives
// RetryAfter, when the limit has room again.
type RateLimitedError struct {
	// RetryAfter is how long until the limit admits one more attempt,
	// as redis_rate's Result says.
	RetryAfter time.Duration
}

// Error says that the fleet's rate limit refused the attempt, and when it
// has room again.
func (e *RateLimitedError) Error() string {
	return "redislimit: rate limit reached; room again in " + e.RetryAfter.String()
}

// Is reports whether target is overload.ErrRateLimited.
func (e *RateLimitedError) Is(target error) bool { return target == overload.ErrRateLimited }

// refusal is a refusal decided in memory, one value per reason so that
// it costs no allocation.
type refusal struct {
	msg         string
	unavailable bool // Redis had failed: it matches ErrUnavailable too
}

func (e *refusal) Error() string { return e.msg }

func (e *refusal) Is(target error) bool {
	return target == overload.ErrRateLimited || e.unavailable && target == ErrUnavailable
}

var (
	errRetriesLimited  = &refusal{msg: "redislimit: rate limit reached: this process's share of RetriesPerSecond"}
	errFallbackLimited = &refusal{msg: "redislimit: rate limit reached: the local fallback's, while Redis is unavailable", unavailable: true}
	errFailClosed      = &refusal{msg: "redislimit: attempt refused: Redis is unavailable and the limit fails closed", unavailable: true}
)
