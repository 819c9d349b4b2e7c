package retry

import (
	"context"
	"errors"
)

// Errors of idempotent calls. Each is matched with errors.Is.
var (
	// ErrInProgress reports that another caller holds the key: a call
	// that ends while waiting for the holder matches it. With
	// IdempotencyOptions.FailWhileHeld Do treats it as retryable: it backs
	// off and looks again.
	ErrInProgress = errors.New("retry: idempotency key in progress")
	// ErrKeyReuse reports that the key was used before with a different
	// payload fingerprint. fn is not called.
	ErrKeyReuse = errors.New("retry: idempotency key reused with a different payload")
	// ErrIdempotencyUnavailable reports that the store failed or timed
	// out, so Do could not know whether the work already ran. fn is not
	// called (fail closed) unless fail-open was chosen.
	ErrIdempotencyUnavailable = errors.New("retry: idempotency store unavailable")
)

// ErrOutcomeNotRecorded is matched by the error of an idempotent call whose
// fn succeeded but whose outcome the store could not record while the claim
// surely held: the work ran, so do not run it again blindly. The error also
// matches the store's error, not [ErrIdempotencyUnavailable]; it holds an
// [*Error] with [OutcomePermanent], DoValue still returns fn's value, and
// the call is not dead-lettered.
var ErrOutcomeNotRecorded = errors.New("retry: the work ran but its outcome is not recorded")

// ErrReplayed is matched by the error of a call that replayed a permanent
// failure stored by an earlier call with the same idempotency key: fn was
// not called, and the error's message is the original one.
var ErrReplayed = errors.New("retry: outcome replayed from the idempotency store")

// replayedError is a stored permanent failure, replayed; unknown says it
// is an unknown outcome, stored as final.
type replayedError struct {
	msg          string
	unknown      bool
	noDeadLetter bool // an unknown outcome stored when its dead letter failed
}

func (e *replayedError) Error() string { return e.msg }
func (e *replayedError) Is(target error) bool {
	return target == ErrReplayed || e.unknown && target == ErrOutcomeUnknown
}

// idemKeyType is the context key for ContextWithIdempotencyKey.
type idemKeyType struct{}

// ContextWithIdempotencyKey returns a copy of ctx carrying key, to give
// each call through a shared Retrier with [WithIdempotency] its own key;
// without WithIdempotency it is ignored. [IdempotencyKeyFromContext] reads
// it; Keys in the package doc says when it overrides IdempotencyOptions.Key.
func ContextWithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idemKeyType{}, key)
}

// IdempotencyKeyFromContext returns the key set with
// [ContextWithIdempotencyKey], and whether there was one.
func IdempotencyKeyFromContext(ctx context.Context) (string, bool) {
	key, ok := ctx.Value(idemKeyType{}).(string)
	return key, ok
}
