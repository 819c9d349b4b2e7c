// Package redislimit shares a downstream's rate limit, and its pauses,
// between every process of a fleet through Redis, for the Retriers of
// github.com/steadfast-go/retry (OverloadOptions.Rate and .Pause).
//
//   - [Rate] is an overload.RateLimit kept in Redis: the GCRA of
//     github.com/go-redis/redis_rate, one EVALSHA round trip per
//     admission, per partition when asked. While Redis fails, it decides
//     by an in-memory overload.Rate, this process's share of the limit
//     (fail open, the default), or refuses every attempt (FailClosed);
//     [Rate.Stats] counts those decisions.
//   - [PauseShare] shares an overload.Pause: its Publish, as the Pause's
//     OnPause, publishes a pause that one process learns; the others,
//     subscribed, set it with Pause.ExtendUntil. The pauses in force are
//     kept in a Redis key too, so that a process that starts later
//     honours them.
//
// # Redis
//
// It needs Redis 7.0 or later and go-redis v9 with ContextTimeoutEnabled
// set on the client, so that the Timeouts bound each round trip. Every
// command touches one key at most, so Redis Cluster works as it is.
//
// # Errors
//
// A refusal matches overload.ErrRateLimited (errors.Is): a
// [*RateLimitedError] from Redis, with when the limit has room again, or,
// while Redis fails, an error that matches [ErrUnavailable] too. A Redis
// failure is never a refusal, unless FailClosed. Bad options give an error
// wrapping retry.ErrInvalidOption that names the problem.
package redislimit
