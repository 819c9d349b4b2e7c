package retry

import (
	"context"
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
	// Payload is the operation's input, from WithPayload.
	Payload []byte `json:"payload,omitempty"`
	// Attempts is how many times fn was called.
	Attempts int `json:"attempts"`
	// FirstAttempt is when the call started; GaveUp when it stopped.
	FirstAttempt time.Time `json:"first_attempt"`
	GaveUp       time.Time `json:"gave_up"`
	// Reason is why the call stopped: never OutcomeSuccess.
	Reason Outcome `json:"reason"`
	// LastError is the text of the last attempt's error ("" if none ran).
	LastError string `json:"last_error"`
	// Errors holds the first and last failed attempts, at most
	// MaxDeadLetterErrors of them, oldest first.
	Errors []AttemptError `json:"errors,omitempty"`
}

// AttemptError is one failed attempt in a [DeadLetter].
type AttemptError struct {
	Attempt int           `json:"attempt"`
	Wait    time.Duration `json:"wait_ns"` // the wait before this attempt; 0 for the first
	Error   string        `json:"error"`
}

// DeadLetterSink stores dead letters. Put must be safe for concurrent use
// and must either store dl durably and return nil, or return an error: a
// nil return is a promise that the record is kept. Put should return
// promptly when ctx is done.
type DeadLetterSink interface {
	Put(ctx context.Context, dl DeadLetter) error
}

// DeadLetterStatus says what happened to a call's dead letter, as reported
// in [Done].
type DeadLetterStatus uint8

// The dead-letter statuses of a call.
const (
	DeadLetterNone     DeadLetterStatus = iota // not dead-lettered: success, or excluded by configuration
	DeadLetterRecorded                         // a sink stored it
	DeadLetterFailed                           // every sink failed; Do's error matches ErrDeadLetterNotRecorded
)

// ErrDeadLetterNotRecorded is matched by the error of a call that should
// have been dead-lettered but whose sinks all failed. The error still
// matches the call's own failure, so the caller can act on the work itself.
var ErrDeadLetterNotRecorded = errors.New("retry: dead letter not recorded")
