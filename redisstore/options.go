package redisstore

import (
	"fmt"
	"strings"

	"github.com/steadfast-go/retry"
)

// DefaultPrefix is put before every idempotency key to make its Redis key,
// so that the store's keys cannot collide with the application's own.
const DefaultPrefix = "retry:idem:"

// Options configures [New]. The zero value, like a nil *Options, gives
// the defaults.
type Options struct {
	// Prefix is the namespace of the store's Redis keys: idempotency key
	// k is stored under Prefix+k. Give each service or environment
	// sharing a Redis its own prefix, so that the same idempotency key
	// used by two of them does not collide.
	//
	// The prefix must not contain '{' or '}': on Redis Cluster a hash
	// tag ("{...}") would pin every key to one slot, so one node would
	// hold them all, and New reports such a prefix as an error wrapping
	// retry.ErrInvalidOption. The store needs no hash tag, because every
	// command touches a single key. Default (""): [DefaultPrefix]; for no
	// prefix at all, set NoPrefix.
	Prefix string
	// NoPrefix stores idempotency keys as they are, with no prefix, for
	// a Redis database that holds nothing else. It is how to say the
	// empty prefix, since Prefix "" means DefaultPrefix; Prefix must then
	// be "". Default: false, a prefix.
	NoPrefix bool
}

// prefix returns the prefix that o sets, or an error wrapping
// retry.ErrInvalidOption.
func (o *Options) prefix() (string, error) {
	switch {
	case o == nil:
		return DefaultPrefix, nil
	case o.NoPrefix && o.Prefix != "":
		return "", invalid("Options.NoPrefix is set with Options.Prefix %q; set one or the other", o.Prefix)
	case o.NoPrefix:
		return "", nil
	case strings.ContainsAny(o.Prefix, "{}"):
		return "", invalid("Options.Prefix %q: the prefix must not contain '{' or '}': a Redis Cluster hash tag would put every key in one slot", o.Prefix)
	case o.Prefix == "":
		return DefaultPrefix, nil
	}
	return o.Prefix, nil
}

// invalid returns an error wrapping retry.ErrInvalidOption that names the
// problem.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: redisstore: "+format, append([]any{retry.ErrInvalidOption}, args...)...)
}
