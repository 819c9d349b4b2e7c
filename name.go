package retry

// Name returns the operation name set with [WithName], or "" when none
// was (or r is nil). Adapters that name calls on their own, such as
// retryhttp's "METHOD host", read it to keep a name the caller chose.
func (r *Retrier) Name() string {
	return r.config().name
}
