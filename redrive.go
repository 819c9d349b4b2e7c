package retry

// ForRedrive returns a Retrier that replays dl, a dead letter, with r's
// policy, dl's name and payload; deadletter.Redrive uses it, and so can a
// redrive of your own. Call it before marking dl redriven: for a record Do
// would refuse (a key over 255 bytes, when r has [WithIdempotency]) it
// returns an error wrapping [ErrInvalidOption]. src must not be nil when r
// has no sink. Every failure is dead-lettered anew, with Redrives one
// higher, and a record without a key is replayed without idempotency;
// Dead letters in the package doc gives the rules.
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
