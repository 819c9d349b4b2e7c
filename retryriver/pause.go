package retryriver

import (
	"context"
	"time"

	"github.com/steadfast-go/retry"
)

// A job under Wrap that meets its Retrier's pause (OverloadOptions.Pause)
// is snoozed, not held: a hold in memory would keep one of the queue's
// workers, which may serve other kinds, and eat into the job's timeout.

// holdAsSnooze hands off every hold, however short: a River attempt has
// no other wait (it makes one attempt), so only the pause's holds reach
// the hand-off.
var holdAsSnooze = &retry.HandOffOptions{Threshold: time.Nanosecond}

// pauseSnooze is the retry.HandOff of one job's call under Wrap: it takes
// a hold for the pause as a snooze of the job, while the job may snooze
// again (River's snoozes metadata below its MaxAttempts, the bound of an
// After's snoozes); otherwise it declines, and the call holds in memory.
// One call uses it, on its goroutine: it needs no lock.
type pauseSnooze struct {
	left bool          // the job may snooze again
	wait time.Duration // the hold it took, 0 if none
}

// snoozeID is the ID a taken hold is handed off as: no job is inserted.
const snoozeID = "river:snooze"

// HandOff takes the hold w if the job may snooze: see pauseSnooze.
func (s *pauseSnooze) HandOff(_ context.Context, w retry.Waiting) (string, error) {
	if !s.left || w.Wait <= 0 {
		return "", nil
	}
	s.wait = w.Wait
	return snoozeID, nil
}
