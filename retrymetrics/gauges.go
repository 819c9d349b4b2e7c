package retrymetrics

import "time"

// GaugeDelta is how one Observer event moves the two gauges that metrics
// observers keep: calls in flight and waits in progress. Each field is -1,
// 0 or +1. Adding up the deltas of every event of a call gives 0 for both
// once the call has ended, and neither gauge goes below 0 on the way, in
// whatever order the events of different calls interleave.
//
// The rule, in one place:
//
//   - A call is in flight from its first attempt's start to its end: +1 at
//     OnAttemptStart for attempt 1, -1 at OnDone when it made an attempt.
//     A call that ends before its first attempt is never in flight.
//   - A call waits from a retry with a delay to the next attempt's start,
//     or to its end if it stops while waiting: +1 at OnRetry with Delay >
//     0, -1 at OnAttemptStart with Wait > 0 or at OnDone with Waited.
type GaugeDelta struct {
	// InFlight changes the number of calls between their first attempt
	// and their end.
	InFlight int
	// Waiting changes the number of calls waiting before their next
	// attempt.
	Waiting int
}

// OnAttemptStart returns the delta of an attempt's start, from the
// AttemptStart event's Attempt and Wait.
func OnAttemptStart(attempt int, wait time.Duration) GaugeDelta {
	var d GaugeDelta
	if attempt <= 1 {
		d.InFlight = 1
	}
	if wait > 0 {
		d.Waiting = -1
	}
	return d
}

// OnRetry returns the delta of a scheduled retry, from the Scheduled
// event's Delay.
func OnRetry(delay time.Duration) GaugeDelta {
	if delay > 0 {
		return GaugeDelta{Waiting: 1}
	}
	return GaugeDelta{}
}

// OnDone returns the delta of a call's end, from the Done event's
// Attempts and Waited.
func OnDone(attempts int, waited bool) GaugeDelta {
	var d GaugeDelta
	if attempts > 0 {
		d.InFlight = -1
	}
	if waited {
		d.Waiting = -1
	}
	return d
}
