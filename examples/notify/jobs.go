package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// job is one notification to send. Its JSON is the request body and the
// dead letter's payload.
type job struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	UserID  string `json:"user_id"`
	Message string `json:"message"`

	index int    // 0-based position in the generated list
	body  []byte // JSON of the fields above
}

// jobTypes are the kinds of notification: the operation names of the
// Retrier (metric labels, dead-letter names), so few and fixed.
var jobTypes = [...]string{"order-shipped", "password-reset", "promo"}

// Why a job cannot be sent; the push service finds out on its own.
const (
	badNone = iota
	badEmptyMessage
	badUser
)

// generateJobs makes n jobs from seed alone. A share permanentRate of them
// is bad: an empty message or a malformed user ID, half each.
func generateJobs(seed uint64, n int, permanentRate float64) []*job {
	rng := rand.New(rand.NewPCG(seed, 0x6a6f6273)) // "jobs"
	jobs := make([]*job, n)
	for i := range jobs {
		j := &job{
			index:  i,
			ID:     fmt.Sprintf("job-%d-%06d", seed, i+1),
			Type:   jobTypes[rng.IntN(len(jobTypes))],
			UserID: fmt.Sprintf("u%08d", rng.IntN(100_000_000)),
		}
		switch j.Type {
		case "order-shipped":
			j.Message = fmt.Sprintf("Your order %d has shipped and arrives on day %d", rng.IntN(1_000_000), 1+rng.IntN(28))
		case "password-reset":
			j.Message = fmt.Sprintf("Your password reset code is %06d", rng.IntN(1_000_000))
		default:
			j.Message = fmt.Sprintf("%d%% off everything until midnight, code SAVE%04d", 5+rng.IntN(46), rng.IntN(10_000))
		}
		if rng.Float64() < permanentRate {
			if rng.IntN(2) == 0 {
				j.Message = ""
			} else {
				j.UserID = fmt.Sprintf("user#%d", rng.IntN(100_000)) // not u + 8 digits
			}
		}
		j.body, _ = json.Marshal(j) // strings only: it cannot fail
		jobs[i] = j
	}
	return jobs
}

// redelivered picks, from seed alone, the jobs the queue delivers a second
// time.
func redelivered(seed uint64, jobs []*job, rate float64) map[int]bool {
	rng := rand.New(rand.NewPCG(seed, 0x72656476)) // "redv"
	set := map[int]bool{}
	for _, j := range jobs {
		if rng.Float64() < rate {
			set[j.index] = true
		}
	}
	return set
}
