package retry

import (
	"context"
	"errors"
	"time"
)

// IdempotencyStore records, per key, who runs the work and how it ended,
// for [WithIdempotency]; storetest has its contract suite. Each method
// must be safe for concurrent use and atomic against every call on the
// same key, from any process; leases and retention run on the store's
// clock. An expired lease's token may be refused (with ErrLeaseLost), and
// must be once another Claim has taken the key over.
type IdempotencyStore interface {
	// Claim looks key up and, when it is free (never seen, its lease
	// expired, or its retention expired), claims it for lease and stores
	// fingerprint with it. It reports what it found:
	//   - ClaimAcquired: the caller holds the key; Token fences the claim.
	//   - ClaimHeld: another caller holds an unexpired lease.
	//   - ClaimCompleted: a final outcome is stored in Outcome.
	// For ClaimHeld and ClaimCompleted, Fingerprint is the one stored with
	// the key.
	Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Claim, error)
	// Renew extends the lease held under token to lease from now. It
	// returns ErrLeaseLost when token no longer holds the key.
	Renew(ctx context.Context, key, token string, lease time.Duration) error
	// Complete stores out as the key's final outcome for retention and
	// ends the lease. It returns ErrLeaseLost when token no longer holds
	// the key; nothing is stored then.
	Complete(ctx context.Context, key, token string, out StoredOutcome, retention time.Duration) error
	// Release drops the claim held under token, so that a later Claim
	// acquires the key at once. Releasing a claim that token no longer
	// holds is not an error and changes nothing.
	Release(ctx context.Context, key, token string) error
}

// ClaimStatus says what [IdempotencyStore.Claim] found. The zero value is
// not a status: Do treats a Claim that returns it as a store failure.
type ClaimStatus uint8

// The results of a claim.
const (
	ClaimAcquired  ClaimStatus = iota + 1 // the caller now holds the key
	ClaimHeld                             // another caller holds the key
	ClaimCompleted                        // a final outcome is stored
)

// String returns "acquired", "held" or "completed".
func (s ClaimStatus) String() string {
	switch s {
	case ClaimAcquired:
		return "acquired"
	case ClaimHeld:
		return "held"
	case ClaimCompleted:
		return "completed"
	default:
		return "unknown"
	}
}

// Claim is the result of [IdempotencyStore.Claim].
type Claim struct {
	// Status says what the store found.
	Status ClaimStatus
	// Token identifies this claim (ClaimAcquired only): Renew, Complete
	// and Release succeed only while it still holds the key, so a caller
	// whose lease expired and was taken over cannot overwrite the new
	// holder's outcome.
	Token string
	// Fingerprint is the fingerprint stored with the key (ClaimHeld and
	// ClaimCompleted).
	Fingerprint string
	// Outcome is the stored outcome (ClaimCompleted only).
	Outcome StoredOutcome
}

// StoredOutcome is a final outcome kept by an [IdempotencyStore].
type StoredOutcome struct {
	// Permanent is false for a success, whose encoded value is in Value,
	// and true for a permanent failure, whose message is in Error.
	Permanent bool
	// Value is the success's value, encoded by
	// IdempotencyOptions.Marshal; nil for calls made with Do, which have
	// no value. For a permanent failure it is nil, or "outcome-unknown"
	// for an outcome not known ([ErrOutcomeUnknown]; with a suffix when
	// its dead letter is not written yet); a store keeps it as it is,
	// whatever Permanent says.
	Value []byte
	// Error is the permanent failure's message, replayed as the text of
	// an error matching [ErrReplayed].
	Error string
}

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
	// ErrLeaseLost is returned by stores when a token no longer holds its
	// key: the lease expired and another caller may have taken over.
	ErrLeaseLost = errors.New("retry: idempotency lease lost")
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
