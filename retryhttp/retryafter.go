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
