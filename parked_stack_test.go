package retry_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrystats"
)

// TestDo_parkedCallKeepsTwoKBStack: a call parked in a wait, with or
// without an observer, keeps the goroutine's first 2 KB stack, even when
// its caller's frames take some of it (here a method value's wrapper and
// a function of the caller's own, about 100 bytes, which took a call to
// 4 KB before Do's and the loop's frames shrank). Its frames and the
// runtime's under the select (arming the timer) must stay under the
// 1,120 B at which a 2 KB stack grows to 4 KB.
func TestDo_parkedCallKeepsTwoKBStack(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation changes the frames; run without -race")
	}
	const n = 2000
	for name, opts := range map[string][]retry.Option{
		"plain":    nil,
		"observed": {retry.WithObserver(new(retrystats.Stats))},
	} {
		t.Run(name, func(t *testing.T) {
			// No budget: it would refuse most of these retries, and this
			// measures what a parked call costs.
			opts := append([]retry.Option{retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithBackoff(retry.Constant(time.Hour)), retry.WithJitter(retry.NoJitter), retry.WithMaxAttempts(2)}, opts...)
			// A few calls meet a deeper path in the runtime (an
			// asynchronous preemption's frame, more frequent on a busy
			// machine), as a hand-written wait does. The least of three
			// measures keeps that noise out; a frame that is too big puts
			// every call at 4 KB, 4,096 B, in all three.
			least := math.Inf(1)
			for range 3 {
				// On the real clock, as users' calls run: measureParked
				// says why neither a mock clock nor synctest would do.
				r := mustNew(t, opts...)
				do := r.Do
				c := measureParked(t, n, func(ctx context.Context) error { return behindAFrame(ctx, do) })
				least = min(least, c.Stack)
			}
			t.Logf("least stack per parked call: %.0f B", least)
			assert.Less(t, least, 2600.0, "stack per parked call, bytes")
		})
	}
}

// behindAFrame calls do from a frame of its own, with 16 bytes of locals,
// which a parked call keeps on its stack above Do's.
//
//go:noinline
func behindAFrame(ctx context.Context, do func(context.Context, func(context.Context) error) error) error {
	var local [16]byte
	local[len(opName)%16]++ // opName is a variable: the array stays
	if local[0] == 255 {
		return nil
	}
	return do(ctx, parkedAttempt)
}
