package retryhttp

import (
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter parses the value of an HTTP Retry-After header (RFC 9110
// §10.2.3): either a number of seconds ("120") or an HTTP date
// ("Wed, 21 Oct 2015 07:28:00 GMT"), which is taken relative to now. It
// reports false for an empty, negative or malformed value, so that the
// caller falls back to its backoff; a date in the past gives 0 and true.
// Pass the result to [retry.After], whose wait is capped by
// [retry.WithMaxDelay] (30s when it is not given).
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
