package retry

import "context"

// quick reports whether Do may make the first attempt itself, before it
// sets up the loop: the options are valid and nothing observes or times
// the call (no observer, time budget or attempt timeout). A first-try
// success then costs one plain call of fn.
func (r *Retrier) quick() bool {
	return r != nil && r.c.err == nil && r.c.observer == nil && r.c.maxElapsed == 0 && r.c.attemptTimeout == 0
}

// resume runs the loop after Do's own first attempt failed with first,
// handing that error over as attempt 1, so the outcome is the same as if
// the loop had made the attempt.
func (r *Retrier) resume(ctx context.Context, fn func(context.Context) error, first error) error {
	replayed := false
	_, err := loop(ctx, &r.c, func(ctx context.Context) (struct{}, error) {
		if !replayed {
			replayed = true
			return struct{}{}, first
		}
		return struct{}{}, fn(ctx)
	}, true)
	return err
}
