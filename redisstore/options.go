package redisstore

import (
	"fmt"
	"strings"

	"github.com/steadfast-go/retry"
)

// DefaultPrefix is put before every idempotency key to make its Redis key,
// so that the store's keys cannot collide with the application's own.
const DefaultPrefix = "retry:idem:"

// Option configures a [Store]. Options are applied once, in order, by
// [New]; a later option overrides an earlier one of the same kind.
type Option func(*config)

type config struct {
	err    error // the first invalid option, reported by New
	prefix string
}

func (c *config) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: redisstore: "+format, append([]any{retry.ErrInvalidOption}, args...)...)
	}
}

// WithPrefix sets the namespace of the store's Redis keys: idempotency key
// k is stored under prefix+k. Give each service or environment sharing a
// Redis its own prefix, so that the same idempotency key used by two of
// them does not collide. The empty prefix stores keys as they are, for a
// database that holds nothing else.
//
// The prefix must not contain '{' or '}': on Redis Cluster a hash tag
// ("{...}") would pin every key to one slot, so one node would hold them
// all, and New reports such a prefix as an error wrapping
// retry.ErrInvalidOption. The store needs no hash tag, because every
// command touches a single key. Default: [DefaultPrefix].
func WithPrefix(prefix string) Option {
	return func(c *config) {
		if strings.ContainsAny(prefix, "{}") {
			c.fail("WithPrefix(%q): the prefix must not contain '{' or '}': a Redis Cluster hash tag would put every key in one slot", prefix)
			return
		}
		c.prefix = prefix
	}
}
