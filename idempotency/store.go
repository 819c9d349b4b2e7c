// Package idempotency is the contract an idempotency store implements for
// retry.WithIdempotency: memstore, redisstore and pgstore implement it,
// and storetest checks one. Callers of retry.Do need none of it.
package idempotency

import (
	"context"
	"errors"
	"time"
)

// Store records, per key, who runs the work and how it ended, for
// retry.WithIdempotency; storetest has its contract suite. Each method
// must be safe for concurrent use and atomic against every call on the
// same key, from any process; leases and retention run on the store's
// clock. An expired lease's token may be refused (with ErrLeaseLost), and
// must be once another Claim has taken the key over.
type Store interface {
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

// ClaimStatus says what [Store.Claim] found. The zero value is
// not a status: retry.Do treats a Claim that returns it as a store failure.
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

// Claim is the result of [Store.Claim].
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
	// Outcome is the stored outcome (ClaimCompleted only). Its Value may
	// be the store's own bytes: a caller must not modify them.
	Outcome StoredOutcome
}

// NonBlocking is an optional interface of a [Store] whose calls never
// block: each returns promptly on its own, with no I/O and no wait for
// another caller beyond a short critical section, as a store in process
// memory does (memstore). retry.Do then calls it without bounding each
// call by IdempotencyOptions.StoreTimeout, which costs a timer per call,
// and passes it the caller's context, or one without its cancellation,
// as it is. A store that may block must not implement it: a call that
// hangs would hang Do.
type NonBlocking interface {
	Store
	// NeverBlocks marks the store as one whose calls never block; Do
	// never calls it.
	NeverBlocks()
}

// StoredOutcome is a final outcome kept by a [Store].
type StoredOutcome struct {
	// Permanent is false for a success, whose encoded value is in Value,
	// and true for a permanent failure, whose message is in Error.
	Permanent bool
	// Value is the success's value, encoded by
	// IdempotencyOptions.Marshal; nil for calls made with Do, which have
	// no value. For a permanent failure it is nil, or "outcome-unknown"
	// for an outcome not known (retry.ErrOutcomeUnknown; with a suffix when
	// its dead letter is not written yet); a store keeps it as it is,
	// whatever Permanent says.
	Value []byte
	// Error is the permanent failure's message, replayed as the text of
	// an error matching retry.ErrReplayed.
	Error string
}

// ErrLeaseLost is returned by stores when a token no longer holds its
// key: the lease expired and another caller may have taken over. The
// error of a call that lost its claim matches it too.
var ErrLeaseLost = errors.New("retry: idempotency lease lost")
