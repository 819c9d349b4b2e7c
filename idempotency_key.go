package retry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/internal/idemctx"
)

// An idempotent call's key: which one a call uses, how an inner call
// knows the keys its enclosing calls hold, and the payload's fingerprint.

// idempotencyKey returns the call's idempotency key: the context's, else
// the option's ("" when the call is not idempotent). A context key that
// an enclosing idempotent call holds (it reached this call through that
// call's fn) was meant for that call: IdempotencyOptions.Key wins over it.
func (cfg *config) idempotencyKey(ctx context.Context) string {
	k, _ := cfg.idempotencyKeyFree(ctx)
	return k
}

// idempotencyKeyFree is idempotencyKey, and says whether it found that no
// enclosing call holds the key (chainHolds), so that the call need not
// look again.
func (cfg *config) idempotencyKeyFree(ctx context.Context) (key string, free bool) {
	if cfg.idem == nil {
		return "", false
	}
	k, ok := IdempotencyKeyFromContext(ctx)
	if !ok {
		return cfg.idem.key, false
	}
	if chainHolds(ctx, cfg.idem.store, k) {
		// Meant for the enclosing call: this call's own key wins, the
		// option's or the one retryhttp gives a request.
		if cfg.idem.key != "" {
			return cfg.idem.key, false
		}
		if rk, ok := idemctx.RequestKey(ctx); ok {
			return rk, false
		}
		return k, false
	}
	return k, true
}

// heldKeyType is the context key under which the context given to fn
// carries the idempotent call that runs it (a keyHolder).
type heldKeyType struct{}

// keyHolder is an idempotent call as the contexts of its fn know it.
type keyHolder interface {
	heldKey() (idempotency.Store, string)
	outerCtx() context.Context // the context the call was given
}

// chainHolds says whether an idempotent call enclosing ctx (one whose fn
// was given ctx or a context derived from it) uses key in store: keys are
// global within a store, so the same key in another store is another key.
func chainHolds(ctx context.Context, store idempotency.Store, key string) bool {
	for depth := 0; ctx != nil && depth < maxInnerDepth; depth++ {
		h, ok := ctx.Value(heldKeyType{}).(keyHolder)
		if !ok {
			return false
		}
		if st, k := h.heldKey(); k == key && sameStore(st, store) {
			return true
		}
		ctx = h.outerCtx()
	}
	return false
}

// maxInnerDepth bounds how many enclosing idempotent calls chainHolds
// looks through.
const maxInnerDepth = 64

// sameStore compares two stores as interface values, without panicking
// on a store type that is not comparable (one such is never the same).
func sameStore(a, b idempotency.Store) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// fingerprint identifies a payload: the hex SHA-256 of p, or "" for none.
func fingerprint(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:])
}
