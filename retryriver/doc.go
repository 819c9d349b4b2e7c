// Package retryriver runs River jobs (github.com/riverqueue/river) with
// the policy of a [retry.Retrier], so that a job backs off, classifies
// its errors, stays idempotent and is dead-lettered as the same work does
// in process under Do.
//
//   - [Policy] is a river.ClientRetryPolicy: the next attempt of a failed
//     job is due after the wait the Retrier's Do takes after the same
//     attempt, with the same formula ([retry.Retrier.Wait]).
//   - [Wrap] wraps a river.Worker: each River attempt is one call of the
//     Retrier's Do with one attempt, whose outcome decides River's:
//     [retry.Permanent] cancels the job, [retry.After] snoozes it for the
//     capped delay, a retryable failure is retried at the Policy's time,
//     and the last failure, which River discards, is written as a
//     [retry.DeadLetter] with the job's args as payload, to redrive by
//     inserting the job again ([Reinsert]). The job's ID is the
//     idempotency key, so a job that River works again after its work
//     ran replays the outcome instead of repeating it.
//   - [HandOff] is a [retry.HandOff] for retry.WithHandOff: a call of Do
//     whose next wait is long, or whose process is stopping, becomes a
//     job of [HandOffArgs] scheduled at the end of the wait, inserted in
//     the caller's transaction when its context has one ([WithTx]); the
//     call returns at once with an error holding a [*retry.HandedOff]
//     with the job's ID. A [HandOffWorker] runs the job's remaining
//     attempts when it is due, in any process, going on with the call's
//     attempt count and under its idempotency key: nothing waits in
//     memory, and nothing is lost when the process stops.
//
// The package needs River's pgx v5 driver or another one only in the
// program: it uses River's generic API.
//
// # Outcomes
//
// Each River attempt is one call of the Retrier's Do limited to one
// attempt (retry.WithMaxAttempts(1)), with the job's encoded args as
// payload ([retry.WithPayload]) and the job's key (Options.Key) as
// idempotency key. Do's result maps to River's:
//
//   - success, or a success replayed by the idempotency store: the job
//     completes;
//   - a failure Do ends with [retry.OutcomePermanent] ([retry.Permanent],
//     WithRetryIf refusing, a replayed permanent failure) or bad input
//     ([retry.ErrInvalidOption]): river.JobCancel, the job is cancelled;
//   - the idempotency store failing ([retry.ErrIdempotencyUnavailable]:
//     the work did not run): a retryable failure, below;
//   - a refusal before the work ran ([retry.OutcomeRefused]: the
//     Retrier's breaker is open, its concurrency limit,
//     retry.OverloadOptions.Limit, has no permit for the attempt, or its
//     rate, OverloadOptions.Rate, no room: [overload.ErrRateLimited]): a
//     retryable failure, below, which spends one of the job's attempts
//     (such a refusal carries no delay to snooze for), and whose dead
//     letter, on the job's last attempt, has the reason refused and no
//     last error;
//   - an attempt that the Retrier's pause (OverloadOptions.Pause: a
//     server asked a call sharing it to come back later) holds before it
//     runs: river.JobSnooze for the rest of the pause, its share of
//     Spread included, which the Pause's Max bounds (not WithMaxDelay).
//     The wrapped worker does not run and River counts no attempt. Wrap
//     gives each call a retry.WithHandOff (in place of any the Retrier
//     has) that takes the hold as the snooze, so that a held job keeps
//     none of the queue's workers, which may serve other kinds, nor any
//     of its timeout, a pause that outlasts the timeout included. Those
//     snoozes count with the After ones below: once the job has snoozed
//     job.MaxAttempts times, a hold is made in memory, and a pause past
//     the timeout ends the call at once, refused with
//     [overload.ErrPaused]: a refusal, above;
//   - args River cannot decode: the worker is not called, and the
//     attempt is a retryable failure, below, whose dead letter holds the
//     encoded args;
//   - a failure holding a [retry.After] delay: river.JobSnooze for that
//     delay capped as Do caps it; River does not count a snooze as an
//     attempt, so after job.MaxAttempts snoozes (River's "snoozes"
//     metadata) an After failure is a retryable one, to bound them;
//   - a context cancelled (the client stopping, the job cancelled): the
//     error as it is, for River to handle;
//   - a river.JobCancel or river.JobSnooze error from the wrapped worker:
//     passed on as it is;
//   - any other failure (retryable, a panic): River retries it after the
//     wait of [Policy], until the job's last attempt (job.MaxAttempts,
//     River's setting: set it as you would WithMaxAttempts), when River
//     discards the job and the Worker first writes its dead letter to
//     Options.DeadLetters. A dead letter that is not recorded adds an
//     error matching [retry.ErrDeadLetterNotRecorded] to the job's last
//     error; River keeps the job as discarded.
//
// Observers therefore hear each River attempt as a call of one attempt
// (AttemptStart.Attempt is 1; the job's attempt is job.Attempt), ending
// with OutcomeExhausted when River will retry or discard, OutcomeHandedOff
// when the pause's hold is snoozed, and no OnRetry: River schedules the
// next attempt. The call is named by the Retrier's WithName, or else by
// the job's kind (a hand-off needs a name). The Retrier's own
// WithMaxAttempts, WithDeadLetter and waits between attempts do not
// apply; give it no WithDeadLetter, or each failed attempt is
// dead-lettered.
package retryriver
