// Package idemctx carries, between retryhttp and package retry, the
// idempotency key of a request as retryhttp scopes it, for the case where
// the request's context already holds a key: that context key wins, unless
// it is the key of an enclosing idempotent call (one whose fn sent the
// request), which package retry can tell and retryhttp cannot.
package idemctx

import "context"

type requestKey struct{}

// WithRequestKey returns a copy of ctx that carries key as a request's
// own idempotency key.
func WithRequestKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, requestKey{}, key)
}

// RequestKey returns the key set with WithRequestKey, and whether there
// was one.
func RequestKey(ctx context.Context) (string, bool) {
	key, ok := ctx.Value(requestKey{}).(string)
	return key, ok
}
