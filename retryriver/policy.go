package retryriver

import (
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/steadfast-go/retry"
)

// Policy is a river.ClientRetryPolicy (for river.Config.RetryPolicy, or a
// [Worker]'s own jobs) that waits after a failed attempt as a
// [retry.Retrier]'s Do would ([retry.Retrier.Wait]). The attempt is
// len(job.Errors)+1, as River counts it, so snoozes do not count; the
// previous wait, read by [retry.Decorrelated] only, is ScheduledAt less
// the last AttemptError.At (0 at first). It is safe for concurrent use.
type Policy struct {
	r   *retry.Retrier
	now func() time.Time
}

// NewPolicy returns the Policy of r; a nil r is the zero retry.Retrier,
// as everywhere a Retrier is taken.
func NewPolicy(r *retry.Retrier) (*Policy, error) {
	return &Policy{r: r, now: time.Now}, nil
}

// NextRetry returns when job's next attempt is due: now plus
// [Policy.Delay].
func (p *Policy) NextRetry(job *rivertype.JobRow) time.Time {
	return p.now().UTC().Add(p.Delay(job))
}

// Delay returns the wait after job's current attempt failed, as the
// Retrier's Do waits after the same attempt. Each call draws from the
// Retrier's random source, as each wait of Do does.
func (p *Policy) Delay(job *rivertype.JobRow) time.Duration {
	d, _ := p.r.Wait(len(job.Errors)+1, prevWait(job), nil, nil)
	return d
}

// prevWait is the wait before job's current attempt, as its row tells.
func prevWait(job *rivertype.JobRow) time.Duration {
	n := len(job.Errors)
	if n == 0 {
		return 0
	}
	return max(job.ScheduledAt.Sub(job.Errors[n-1].At), 0)
}
