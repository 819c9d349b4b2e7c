package retry

// ForRedrive returns a Retrier that replays dl with r's policy and dl's
// name and payload, for deadletter.Redrive or a redrive of your own; src
// must not be nil when r has no sink. Call it before marking dl redriven:
// it fails with [ErrInvalidOption] for a record Do would refuse (a key
// over 255 bytes, with [WithIdempotency]). A record without a key is
// replayed without idempotency; see Dead letters in the package doc.
func (r *Retrier) ForRedrive(dl DeadLetter, src DeadLetterSink) (*Retrier, error) {
	return r.With(WithName(dl.Name), WithPayload(dl.Payload), Option{set: setFunc, v: func(c config) config {
		d := &deadLetterConfig{timeout: defaultDeadLetterTimeout, maxErrors: defaultDeadLetterErrors, puts: make(chan struct{}, maxPuts)}
		if c.dl != nil {
			*d = *c.dl
		}
		if d.sink == nil {
			if s, isNil := nilArg(src); isNil {
				c.failf("ForRedrive(dl, %s): the Retrier has no sink, so the source must not be nil", s)
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
				c.failf("ForRedrive: the record cannot be replayed under its key: %s", p)
			}
		}
		return c
	}})
}
