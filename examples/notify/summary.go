package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// summary is what a run did. Every figure depends only on the flags (the
// seed among them) and on what earlier runs left in a shared store, not on
// the scheduling or the machine (the jobs run one at a time on the
// timeline, see vclock.go): the same seed prints the same table.
type summary struct {
	Jobs, Deliveries, Redelivered int
	Sent                          int64 // notifications the service delivered in this run
	DeliveredTwice                int64 // deliveries of a job the service had delivered before, in this run
	Deduplicated                  int64 // requests the service answered from their Idempotency-Key, not delivering
	Requests                      int64 // requests the service saw: downstream calls
	RetriedJobs                   int   // deliveries that needed more than one attempt
	Attempts, Retries             uint64
	Permanent                     int // deliveries that ended in a permanent failure
	EmptyMessage, UnknownUser     int
	Exhausted                     int   // every attempt failed (or the time budget ran out)
	Deadline                      int   // the next wait would have passed the job's deadline, or it passed during a wait
	Refused                       int   // the retry budget refused the next retry
	LimitRefused                  int   // the concurrency limit (-limit) refused an attempt
	LimitRefusedFirst             int   // of them, a first attempt: nothing was sent
	Limit                         int   // -limit's limit at the end of the run
	TooMany                       int64 // 429s the jobs received
	TooManyOverRate               int64 // of them, the push service's rate's; the rest at random (-fail-rate)
	PauseRefused                  int   // the pause (-pause) outlasted the job's deadline: ended at once
	Unknown                       int   // the deadline passed while a request was out: sent or not, no one knows
	HandedOff                     int   // the remaining attempts went to a queue (retry.WithHandOff): not failed, not done here
	Succeeded                     int   // deliveries whose call succeeded in this run
	Other                         int   // deliveries that ended any other way (a bug, or a stopped run)
	DeadLettered, NotDeadLettered uint64
	DuplicatesPrevented           int // redeliveries the idempotency store answered
	EarlierRun                    int // first deliveries the idempotency store answered: done by an earlier run
	P50, P99                      time.Duration

	// With -river: the jobs of the seed in River, by final state, and the
	// push service's shared record (every process's deliveries).
	RiverCompleted, RiverCancelled, RiverDiscarded int
	RiverDelivered, RiverTwice                     int64

	atLeastOnce bool // -at-least-once: an unknown outcome is not replayed
	limit       bool // -limit: its row is shown
	pause       bool // -pause: its row is shown
	serviceRate int  // -service-rate; 0: none
	river       bool // -river: Jobs, Redelivered and the notes are this process's share
	unhandled   []error
}

func (r *runner) summarize(jobs []*job) summary {
	snap := r.stats.Snapshot()
	s := summary{
		Jobs: len(jobs), Redelivered: len(r.redeliv), Deliveries: len(r.results),
		Sent: r.svc.deliveries.Load(), DeliveredTwice: r.svc.duplicates.Load(), Deduplicated: r.svc.deduped.Load(), Requests: r.svc.requests.Load(),
		Attempts: snap.Attempts, Retries: snap.Retries,
		DeadLettered: snap.DeadLettersRecorded, NotDeadLettered: snap.DeadLettersFailed,
		atLeastOnce: r.cfg.atLeastOnce,
		TooMany:     r.limited.all.Load(), TooManyOverRate: r.limited.overRate.Load(), pause: r.pause != nil, serviceRate: r.cfg.serviceRate,
	}
	if r.limit != nil {
		s.limit, s.Limit = true, r.limit.Stats().Limit
	}
	var durations []time.Duration
	for _, res := range r.results {
		if res.unhandled != nil {
			s.unhandled = append(s.unhandled, res.unhandled)
			s.Other++
			continue
		}
		switch {
		case res.replayed && res.delivery > 1:
			s.DuplicatesPrevented++
			continue
		case res.replayed:
			s.EarlierRun++
			continue
		}
		if res.done.Attempts > 0 {
			durations = append(durations, res.elapsed)
		}
		if res.done.Attempts > 1 {
			s.RetriedJobs++
		}
		switch res.done.Outcome {
		case retry.OutcomeSuccess:
			s.Succeeded++
		case retry.OutcomePermanent:
			s.Permanent++
			switch res.status {
			case http.StatusBadRequest:
				s.EmptyMessage++
			case http.StatusNotFound:
				s.UnknownUser++
			}
		case retry.OutcomeExhausted, retry.OutcomeMaxElapsed:
			s.Exhausted++
		case retry.OutcomeDeadline:
			s.Deadline++
		case retry.OutcomeRefused:
			switch {
			case errors.Is(res.done.Err, overload.ErrLimitExceeded):
				s.LimitRefused++
				if res.done.Attempts == 0 {
					s.LimitRefusedFirst++
				}
			case errors.Is(res.done.Err, overload.ErrPaused):
				s.PauseRefused++
			default:
				s.Refused++
			}
		case retry.OutcomeUnknown:
			s.Unknown++
		case retry.OutcomeHandedOff:
			s.HandedOff++
		default:
			s.Other++
		}
	}
	slices.Sort(durations)
	s.P50, s.P99 = percentile(durations, 50), percentile(durations, 99)
	return s
}

// percentile returns the nearest-rank p-th percentile of sorted d.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (p*len(d) + 99) / 100 // ceil(p/100 * n)
	return d[max(i-1, 0)]
}

// table renders the summary; it holds nothing that varies between runs
// with the same flags.
func (s summary) table() string {
	var b strings.Builder
	row := func(name string, v any, note string) { fmt.Fprintf(&b, "  %-28s%14v   %s\n", name, v, note) }
	perJob := float64(s.Requests) / float64(s.Jobs)
	if s.river {
		perJob = float64(s.Requests) / float64(max(s.Jobs, 1))
		row("jobs", s.Jobs, fmt.Sprintf("finished by this process: %d deliveries, %d acknowledgements lost (River worked those again)", s.Deliveries, s.Redelivered))
		row("jobs in River", s.RiverCompleted+s.RiverCancelled+s.RiverDiscarded, fmt.Sprintf("every process's: %d completed, %d cancelled, %d discarded", s.RiverCompleted, s.RiverCancelled, s.RiverDiscarded))
		row("sent", s.Sent, fmt.Sprintf("notifications the push service delivered for this process; %d for every process", s.RiverDelivered))
	} else {
		row("jobs", s.Jobs, fmt.Sprintf("%d deliveries: the queue delivered %d jobs twice", s.Deliveries, s.Redelivered))
		row("sent", s.Sent, "notifications the push service delivered")
	}
	if s.river {
		row("retried", s.RetriedJobs, fmt.Sprintf("deliveries that needed more than one River attempt: %d attempts here retried or snoozed by River, %d attempts here in all", s.Retries, s.Attempts))
		row("permanent", s.Permanent, fmt.Sprintf("empty message %d, invalid user %d: not retried, cancelled in River", s.EmptyMessage, s.UnknownUser))
		row("exhausted", s.Exhausted, fmt.Sprintf("all %d River attempts failed: discarded", maxAttempts))
	} else {
		row("retried", s.RetriedJobs, fmt.Sprintf("deliveries that needed more than one attempt: %d retries, %d attempts in all", s.Retries, s.Attempts))
		row("permanent", s.Permanent, fmt.Sprintf("empty message %d, invalid user %d: not retried", s.EmptyMessage, s.UnknownUser))
		row("exhausted", s.Exhausted, fmt.Sprintf("all %d attempts failed", maxAttempts))
	}
	row("deadline", s.Deadline, "the next wait would have ended past the job's deadline, or it passed during a wait")
	if !s.river {
		rate := "no rate (-service-rate 0)"
		if s.serviceRate > 0 {
			rate = fmt.Sprintf("%d a second", s.serviceRate)
		}
		held := "each Retry-After held every job (-pause)"
		if !s.pause {
			held = "each Retry-After held its own job alone (-pause=false)"
		}
		row("429 received", s.TooMany, fmt.Sprintf("%d over the push service's %s, the rest at random; %s", s.TooManyOverRate, rate, held))
	}
	row("refused by the budget", s.Refused, "failures outpaced successes: no retry (which ones follows the timeline's order)")
	if s.pause {
		row("refused by the pause", s.PauseRefused, "the pause outlasted the job's deadline: ended at once, nothing sent then")
	}
	if s.limit { // only with -limit: the table is otherwise unchanged
		row("refused by the limit", s.LimitRefused, fmt.Sprintf("the concurrency limit (%d at the end) had no permit: %d first attempts, nothing sent; %d retries, after a failure", s.Limit, s.LimitRefusedFirst, s.LimitRefused-s.LimitRefusedFirst))
	}
	once := "at most once, not sent again"
	if s.atLeastOnce {
		once = "at least once, a redelivery after the lease sends it again"
	}
	row("unknown", s.Unknown, "the deadline passed while the request was out: pushed or not; "+once)
	if s.HandedOff > 0 { // only with a queue to hand long waits to: the table is otherwise unchanged
		row("handed off", s.HandedOff, "the remaining attempts went to the queue, to run at their time: not failed")
	}
	if s.river {
		row("dead-lettered", s.DeadLettered, fmt.Sprintf("the exhausted ones, by retryriver.Wrap (the cancelled stay in River); %d could not be stored", s.NotDeadLettered))
	} else {
		row("dead-lettered", s.DeadLettered, fmt.Sprintf("the permanent, exhausted, deadline, refused and unknown ones; %d could not be stored", s.NotDeadLettered))
	}
	row("duplicates prevented", s.DuplicatesPrevented, "redeliveries the idempotency store answered: not sent again")
	row("done by an earlier run", s.EarlierRun, "first deliveries the idempotency store answered (same seed, shared store)")
	row("deduplicated by the service", s.Deduplicated, "requests whose Idempotency-Key the push service had delivered: answered, not delivered again")
	if s.river {
		row("delivered twice", s.DeliveredTwice, fmt.Sprintf("by the push service's own count, of this process's deliveries; %d of every process's", s.RiverTwice))
	} else {
		row("delivered twice", s.DeliveredTwice, "by the push service's own count")
	}
	row("accounted", fmt.Sprintf("%d / %d", s.accounted(), s.Deliveries), s.accounting())
	if s.river {
		row("job duration p50 / p99", s.P50.Round(time.Millisecond).String()+" / "+s.P99.Round(time.Millisecond).String(), "real time, from the insert to the end")
	} else {
		row("job duration p50 / p99", s.P50.Round(time.Millisecond).String()+" / "+s.P99.Round(time.Millisecond).String(), "virtual time, from the first attempt to the end")
	}
	row("downstream calls per job", fmt.Sprintf("%.2f", perJob), fmt.Sprintf("%d requests to the push service", s.Requests))
	return b.String()
}

// accounted is the deliveries the summary accounts for: each ended one
// way, so it equals Deliveries.
func (s summary) accounted() int {
	return s.Succeeded + s.Permanent + s.Exhausted + s.Deadline + s.Refused + s.LimitRefused + s.PauseRefused + s.Unknown + s.HandedOff + s.DuplicatesPrevented + s.EarlierRun + s.Other
}

// accounting names the terms of accounted.
func (s summary) accounting() string {
	t := fmt.Sprintf("deliveries: %d succeeded + permanent + exhausted + deadline + refused + unknown + %d replayed", s.Succeeded, s.DuplicatesPrevented+s.EarlierRun)
	if s.HandedOff > 0 {
		t += fmt.Sprintf(" + %d handed off", s.HandedOff)
	}
	if s.Other > 0 {
		t += fmt.Sprintf(" + %d other", s.Other)
	}
	return t
}

// unsent is how many deliveries ended neither sent nor replayed.
func (s summary) unsent() int {
	return s.Deliveries - s.Succeeded - s.DuplicatesPrevented - s.EarlierRun
}

// printCommands says where the dead letters are and how to list and
// redrive them with cmd/deadletters.
func printCommands(w io.Writer, c config, b *backends, epoch time.Time, s summary) {
	switch {
	case s.DeadLettered == 0 && s.unsent() == 0:
		fmt.Fprintf(w, "\nNothing gave up: no dead letters.\n")
		return
	case uint64(s.unsent()) != s.DeadLettered:
		fmt.Fprintf(w, "\n%d deliveries were not sent and %d are dead letters: the rest are handed back to the queue, unacknowledged, for a redelivery.\n", s.unsent(), s.DeadLettered)
		if s.DeadLettered == 0 {
			return
		}
	}
	where := b.where
	// The run's epoch (see backends.epoch) to the microsecond, as
	// deadletters -since reads it (RFC 3339 with a fraction), so that an
	// earlier run's records of the same second are not selected; not to
	// the nanosecond, since PostgreSQL keeps microseconds: a record of
	// this run stored with its time truncated must still be selected.
	since := epoch.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
	resend := "go run ./examples/notify -resend"
	var secrets redacted
	switch {
	case c.redis != "":
		resend += fmt.Sprintf(" -redis %s -namespace %s", shellArg(c.redis), c.namespace)
	case c.postgres != "":
		var conn string
		conn, secrets = redactConn(c.postgres)
		resend += fmt.Sprintf(" -postgres %s -namespace %s", shellDoubleQuote(conn), c.namespace)
	}
	fmt.Fprintf(w, "\nThe %d jobs that gave up are dead letters (%s). From the repository root:\n", s.DeadLettered, b.sinkName)
	fmt.Fprintf(w, "  go run ./cmd/deadletters list %s -since %s\n", where, since)
	resendable := s.resendable()
	if len(resendable) > 0 {
		fmt.Fprintf(w, "  go run ./cmd/deadletters redrive %s -since %s -reason %s -exec %s\n", where, since, strings.Join(resendable, ","), shellQuote(resend))
	}
	switch {
	case secrets.password && secrets.sslPassword:
		fmt.Fprintf(w, "The commands leave out the password and the sslpassword of -postgres: set PGPASSWORD (or use ~/.pgpass) and PGSSLPASSWORD where you run them.\n")
	case secrets.password:
		fmt.Fprintf(w, "The commands leave out the password of -postgres: set PGPASSWORD (or use ~/.pgpass) where you run them.\n")
	case secrets.sslPassword:
		fmt.Fprintf(w, "The commands leave out the sslpassword of -postgres: set PGSSLPASSWORD where you run them.\n")
	}
	if len(resendable) > 0 {
		fmt.Fprintf(w, "Redrive sends each %s job again, under its idempotency key", strings.Join(resendable, ", "))
		if c.redis == "" && c.postgres == "" {
			fmt.Fprintf(w, " (with -redis or -postgres, a job sent meanwhile is not sent twice)")
		}
		fmt.Fprintf(w, ".\n")
	}
	if s.Permanent > 0 {
		fmt.Fprintf(w, "The %d permanent ones (empty message, invalid user) fail again until their data is fixed.\n", s.Permanent)
	}
	if s.Unknown > 0 {
		fmt.Fprintf(w, "The %d unknown ones may have been pushed: find out before sending them again (-reason unknown); no redrive above takes them.\n", s.Unknown)
	}
}

// resendable are the reasons of this run's dead letters whose job was
// surely not sent and may be sent again as it is, by their names in
// deadletters -reason: not permanent (fails again), nor unknown (may
// have been sent).
func (s summary) resendable() []string {
	var reasons []string
	for _, r := range []struct {
		n       int
		outcome retry.Outcome
	}{{s.Exhausted, retry.OutcomeExhausted}, {s.Deadline, retry.OutcomeDeadline}, {s.Refused + s.LimitRefused + s.PauseRefused, retry.OutcomeRefused}} {
		if r.n > 0 {
			reasons = append(reasons, r.outcome.String())
		}
	}
	return reasons
}

// postgresWhere is the deadletters flags that name the dead-letter table
// in the database conn names, without its password.
func postgresWhere(conn, table string) string {
	conn, _ = redactConn(conn)
	return fmt.Sprintf("-postgres %s -table %s", shellQuote(conn), table)
}
