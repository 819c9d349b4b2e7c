package retryhttp

import (
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter parses a Retry-After value (RFC 9110 §10.2.3), seconds
// ("120") or an HTTP date taken relative to now (a past one gives 0,
// true); it reports false for an empty, negative or malformed value. Pass
// the result to [retry.After], capped by [retry.WithMaxDelay] (default 30s).
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if value[0] >= '0' && value[0] <= '9' {
		secs, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return maxDuration, true // absurdly large: the max delay caps it
			}
			return 0, false
		}
		if secs > int64(maxDuration/time.Second) {
			return maxDuration, true
		}
		return time.Duration(secs) * time.Second, true
	}
	// The three date formats HTTP recipients must accept.
	for _, layout := range [...]string{time.RFC1123, time.RFC850, time.ANSIC} {
		if t, err := time.Parse(layout, value); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	return 0, false
}

const maxDuration = time.Duration(1<<63 - 1)

// unixTimeFrom is the least value [ParseRateLimitReset] reads as a Unix
// time rather than seconds from now: 1e9 s is 2001-09-09, and no server
// asks for a wait of 31 years.
const unixTimeFrom = 1_000_000_000

// ParseRateLimitReset parses a rate limit's reset header, such as
// X-RateLimit-Reset: a non-negative integer of seconds, read as seconds
// from now when below 1e9 and as a Unix time in seconds (GitHub's form)
// from 1e9 on, since a wait of 1e9 s (31 years) is never meant; a Unix
// time in the past gives 0, true. It reports false for an empty, negative,
// fractional or malformed value. A Unix time in milliseconds reads as one
// far ahead, which the Retrier's max delay caps: do not read such a
// header with it. Envoy's rate_limited_retry_back_off reads both forms,
// told apart by configuration; one rule serves here, as a header's form
// is fixed by its server.
func ParseRateLimitReset(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" || value[0] < '0' || value[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(value, 10, 64)
	switch {
	case err != nil:
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return maxDuration, true // absurdly far: the max delay caps it
		}
		return 0, false
	case n < unixTimeFrom:
		return time.Duration(n) * time.Second, true
	}
	return max(time.Unix(n, 0).Sub(now), 0), true // Sub saturates far ahead
}
