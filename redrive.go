package retry

// ForRedrive returns a Retrier for replaying dl, a dead letter, with r's
// policy: named and with the payload of dl, and dead-lettering every
// failure, whatever the outcome, as a new record with Redrives one higher
// and RedriveOf set to dl.ID. That record goes to r's sink, or to src when
// r has none. A failure replayed by [WithIdempotency] (dl's key holds a
// stored failure, so fn is not called) is dead-lettered too, unlike in
// other calls: dl is marked as redriven, and without a new record its work
// would be lost. A replay that lost to another holder of the key, or whose
// success the store could not record, is not: that work is the other
// holder's, or done. A record without an idempotency key is replayed without
// idempotency: r's default key, shared among unrelated records, would be
// wrong. Give the replay dl's key with [ContextWithIdempotencyKey]. It is
// what deadletter.Redrive uses; use it to write your own, and call it
// before marking dl: it returns an error wrapping [ErrInvalidOption] for a
// record that Do would refuse before any attempt, and so before writing a
// new record (a key of over 255 bytes, when r has [WithIdempotency]).
// src must not be nil when r has no sink.
func (r *Retrier) ForRedrive(dl DeadLetter, src DeadLetterSink) (*Retrier, error) {
	return r.With(WithName(dl.Name), WithPayload(dl.Payload), Option{set: setFunc, v: func(c config) config {
		d := &deadLetterConfig{timeout: defaultDeadLetterTimeout, maxErrors: defaultDeadLetterErrors, puts: make(chan struct{}, maxPuts)}
		if c.dl != nil {
			*d = *c.dl
		}
		if d.sink == nil {
			if s, isNil := nilArg(src); isNil {
				c.fail("ForRedrive(dl, %s): the Retrier has no sink, so the source must not be nil", s)
				return c
			}
			d.sink = src
		}
		d.on = 1<<OutcomePermanent | 1<<OutcomeExhausted | 1<<OutcomeMaxElapsed | 1<<OutcomeDeadline | 1<<OutcomeCanceled | 1<<OutcomeRefused | 1<<OutcomeUnknown
		d.origin = &dl
		c.dl = d
		switch {
		case dl.IdempotencyKey == "":
			c.idem = nil
		case c.idem != nil:
			// Do would refuse the key before any attempt, and so
			// before any new dead letter: say so now, while the
			// record can still be left as it is.
			if p := idemKeyProblem(dl.IdempotencyKey); p != "" {
				c.fail("ForRedrive: the record cannot be replayed under its key: %s", p)
			}
		}
		return c
	}})
}
