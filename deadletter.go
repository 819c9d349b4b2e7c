package retry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"
)

// DeadLetter is the record of a call that gave up, kept so that an operator
// can see what failed and why, and replay it once the cause is fixed.
type DeadLetter struct {
	// ID is unique per record: 32 lower-case hex digits from a random
	// 128-bit value.
	ID string `json:"id"`
	// Name is the operation's name, from WithName.
	Name string `json:"name"`
	// IdempotencyKey is the call's idempotency key, if any, so that a
	// replay of work that meanwhile succeeded does nothing.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Payload is the operation's input, from WithPayload (a copy).
	Payload []byte `json:"payload,omitempty"`
	// Attempts is how many attempts the call made, as in [Error].
	Attempts int `json:"attempts"`
	// FirstAttempt is when the call started, on the Retrier's clock.
	FirstAttempt time.Time `json:"first_attempt"`
	// GaveUp is when the call stopped, on the Retrier's clock.
	GaveUp time.Time `json:"gave_up"`
	// Reason is why the call stopped: never OutcomeSuccess.
	Reason Outcome `json:"reason"`
	// LastError is the text of the last attempt's error ("" if none ran).
	LastError string `json:"last_error"`
	// Errors holds the failed attempts, oldest first: all of them up to
	// DeadLetterOptions.MaxErrors (10 by default), else the first half and
	// the last half of that bound, so both how it started and how it
	// ended are kept.
	Errors []AttemptError `json:"errors,omitempty"`
	// Redrives counts the replays that led to this record: 0 for a call
	// made by the application, n+1 when a redrive ([Retrier.ForRedrive]) replayed a record with
	// Redrives n and the replay failed again.
	Redrives int `json:"redrives,omitempty"`
	// RedriveOf is the ID of the record whose replay failed and produced
	// this one; "" when Redrives is 0.
	RedriveOf string `json:"redrive_of,omitempty"`
	// Redriven is when a redrive (deadletter.Redrive) marked this record
	// for replay; the zero time while it is pending. Sinks fill it in when
	// they read records back; Do leaves it zero.
	Redriven time.Time `json:"redriven,omitzero"`
}

// AttemptError is one failed attempt in a [DeadLetter].
type AttemptError struct {
	Attempt int           `json:"attempt"`         // 1 for the first call of fn
	Wait    time.Duration `json:"wait_ns"`         // the wait before this attempt; 0 for the first
	Error   string        `json:"error,omitempty"` // the attempt's error text
}

// DeadLetterSink stores dead letters. Put must be safe for concurrent use
// and either store dl durably and return nil, a promise that it is kept,
// or return an error. It should return promptly when ctx (bounded by
// DeadLetterOptions.Timeout) is done, and may keep dl.Payload and dl.Errors
// only read-only. Do's error texts are at most 4,096 bytes each, 64 KiB in
// all; package deadletter's sinks bound hand-built records the same way.
type DeadLetterSink interface {
	// Put stores dl durably and returns nil, or returns an error.
	Put(ctx context.Context, dl DeadLetter) error
}

// ErrDeadLetterNotRecorded is matched by the error of a call that should
// have been dead-lettered but whose sinks all failed or timed out; the
// error also matches the call's failure ([*Error]) and each sink's error,
// so the caller can keep the work. It means "not known to be recorded": a
// sink may fail after its write committed, so work may be dead-lettered
// twice, under two IDs, but is never silently lost.
var ErrDeadLetterNotRecorded = errors.New("retry: dead letter not recorded")

// newDeadLetterID returns a new random record ID: 32 lower-case hex digits
// from crypto/rand.
func newDeadLetterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24: it crashes the program instead
	return hex.EncodeToString(b[:])
}
