package deadletter

import (
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/internal/clip"
)

// Clip returns dl with its error texts bounded, as the sinks of this
// package and of module pgdeadletter store every record, whoever built
// it: each error text, dl.LastError and each of dl.Errors, to at most
// 4096 bytes (its first and last 2 KB or so, cut at UTF-8 boundaries,
// with "…[N bytes cut]…" between), and all of them together to at most
// 64 KiB, by dropping the attempts in the middle of dl.Errors and keeping
// the first and last ones. dl.Payload is never cut: it is the work, and
// [Redrive] needs it whole. Do bounds the records it builds the same way,
// so Clip changes nothing in them. dl itself is not changed: Clip copies
// dl.Errors when it changes it.
func Clip(dl retry.DeadLetter) retry.DeadLetter {
	dl.LastError, dl.Errors = clip.Record(dl.LastError, dl.Errors, attemptText)
	return dl
}

func attemptText(e *retry.AttemptError) *string { return &e.Error }
