// Package deadletter stores the dead letters of [retry.WithDeadLetter] and
// replays them: [MemorySink] for tests, [FileSink] (an fsynced JSON Lines
// file) for a single host, [ScanFile] to read such a file a record at a
// time, [Redrive] to replay the records of any [Source] once their cause
// is fixed, and [Filter] to select records for listing and purging. The
// PostgreSQL sink is module pgdeadletter. Every sink bounds the error
// texts of what it stores ([Clip]: 4096 bytes a text, 64 KiB a record)
// and keeps the payload whole. Package deadlettertest checks that a sink
// of your own keeps the contract they keep.
//
// # Redriving
//
// [Redrive] marks each record as redriven in its source before it replays
// it, so no record is replayed twice, even by Redrives running at once; a
// crash during a replay leaves the record marked and not replayed again.
// A replay runs with r's policy, named and with the record's payload, and
// keeps the record's idempotency key, so that replaying work that
// meanwhile succeeded is a no-op:
//
//   - With [retry.WithIdempotency] (and no IdempotencyOptions.Key: each
//     record brings its own), the replay runs under the record's key: a
//     completed key replays the stored outcome without calling handler.
//     A stored failure (permanent, or exhausted with
//     [retry.IdempotencyOptions].KeepFailures) is replayed too, without
//     calling handler, dead-lettered anew so the record is not lost, and
//     counted in Report.Replayed; redrive such records with a Retrier
//     without idempotency and a handler that checks dl.IdempotencyKey.
//     Records without a key are replayed without the store.
//   - Without WithIdempotency, handler gets the key in dl.IdempotencyKey
//     and must make the work idempotent itself.
//
// A replay that fails for any reason, a cancelled ctx included, is
// dead-lettered as a new record with Redrives one higher and RedriveOf set
// to the old ID, by r's sink or, when r has none, by the source (see
// [retry.Retrier.ForRedrive]). When no sink stores it, the replay's error
// (matching [retry.ErrDeadLetterNotRecorded]) is joined into Redrive's
// error and the next record is replayed. A record that r cannot replay as
// it is (see ForRedrive) is left pending, neither marked nor replayed,
// counted in Report.Invalid, and its reason joined into Redrive's error.
//
// # The file sink
//
// A [FileSink]'s Put returns nil only after the record's bytes were
// written and fsynced, so it survives a crash of the process or the
// machine. Nothing is rewritten in place: [FileSink.MarkRedriven] appends
// a marker line that readers fold into the record's Redriven field, and
// [FileSink.Purge] writes the lines it keeps (torn ones byte for byte) to
// a new file in the same directory, fsyncs it and renames it over the old
// one, so a crash leaves one whole file or the other; Puts wait meanwhile,
// then go to the new file.
//
// Several processes may append to one file on a local file system (each
// batch is one O_APPEND write, which Linux and macOS keep whole), but
// marks are atomic only within one FileSink: run one [Redrive] of a file
// at a time, and Purge only while the sink is the file's one writer. Purge
// fails, purging nothing, when the file grew while it copied, but a record
// appended after its rename goes to the old file and is lost. Network file
// systems are not supported.
//
// # Cost
//
// Concurrent Puts of a FileSink share one write and one fsync (group
// commit): the first Put of a batch writes and fsyncs the records that
// joined it while the previous fsync ran, and finishes whatever its ctx
// says, since the others wait on it (at most one fsync late).
// FileOptions.SyncEach gives each Put its own, with the same guarantee and
// far fewer records a second. [ReadFile], [FileSink.List] and
// [FileSink.Pending] hold every record in memory; [ScanFile] and
// [FileSink.ScanPending] hold one at a time, plus a small entry per record
// (its ID, times and offset), and read the file twice. [Redrive] of a
// [PendingScanner] therefore holds one record, and Purge only the IDs of
// the records it deletes. BENCHMARKS.md has the figures.
package deadletter

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/steadfast-go/retry"
)

// NewID returns a new random record ID, as Do gives every dead letter: 32
// lower-case hex digits of a random 128-bit value (crypto/rand).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24: it crashes the program instead
	return hex.EncodeToString(b[:])
}

// Func adapts a function to a [retry.DeadLetterSink] (a queue, an HTTP
// endpoint, a test). It must keep that contract: nil only once dl is
// stored durably, and a prompt return when ctx is done. A nil Func is
// refused by [retry.WithDeadLetter].
type Func func(ctx context.Context, dl retry.DeadLetter) error

// Put calls f(ctx, dl).
func (f Func) Put(ctx context.Context, dl retry.DeadLetter) error { return f(ctx, dl) }
