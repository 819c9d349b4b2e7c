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
//
// The package needs River's pgx v5 driver or another one only in the
// program: it uses River's generic API.
package retryriver
