package deadletter

import (
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/internal/clip"
)

// Clip returns dl with its error texts bounded, as every sink here and in
// pgdeadletter stores records: each text (LastError, each of Errors) to
// 4096 bytes, its two ends kept at UTF-8 boundaries around "…[N bytes
// cut]…", and all together to 64 KiB by dropping middle attempts of
// Errors. Payload is never cut. dl is not changed, and a record Do built
// comes back as it was.
func Clip(dl retry.DeadLetter) retry.DeadLetter {
	dl.LastError, dl.Errors = clip.Record(dl.LastError, dl.Errors, attemptText)
	return dl
}

func attemptText(e *retry.AttemptError) *string { return &e.Error }
