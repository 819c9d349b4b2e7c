// Package deadletter stores the dead letters of [retry.WithDeadLetter] and
// replays them: [MemorySink] for tests, [FileSink] (an fsynced JSON Lines
// file) for a single host, [ScanFile] to read such a file a record at a
// time, [Redrive] to replay the records of any [Source] once their cause
// is fixed, and [Filter] to select records for listing and purging. The
// PostgreSQL sink is module pgdeadletter. Every sink bounds the error
// texts of what it stores ([Clip]: 4096 bytes a text, 64 KiB a record)
// and keeps the payload whole. Package deadlettertest checks that a sink
// of your own keeps the contract they keep.
package deadletter

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/steadfast-go/retry"
)

// NewID returns a new random record ID, as Do gives every dead letter: 32
// lower-case hex digits from a random 128-bit value (crypto/rand). Use it
// to build records of your own.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24: it crashes the program instead
	return hex.EncodeToString(b[:])
}

// Func adapts a function to a [retry.DeadLetterSink], for a sink of your
// own (a queue, an HTTP endpoint) or a test. It must keep the contract
// of [retry.DeadLetterSink]: return nil only once dl is stored durably,
// and return promptly when ctx is done. A nil Func is refused by
// [retry.WithDeadLetter].
type Func func(ctx context.Context, dl retry.DeadLetter) error

// Put calls f(ctx, dl).
func (f Func) Put(ctx context.Context, dl retry.DeadLetter) error { return f(ctx, dl) }
