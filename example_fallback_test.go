package retry_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/overload"
)

// A write that gave up is compensated later, by its Outcome: redriven
// from its dead letter only when it surely did not happen; an unknown
// outcome is reconciled first (it may have happened), a permanent one
// fixed (it would fail again).
func Example_fallbackCompensateLater() {
	sink := deadletter.NewMemorySink() // deadletter.OpenFile or pgdeadletter in production
	r, _ := retry.New(retry.WithDeadLetter(sink, nil), retry.WithBackoff(retry.Constant(0)))
	charge, _ := r.With(retry.WithName("charge"), retry.WithPayload([]byte(`{"order":42}`)))
	err := charge.Do(context.Background(), func(context.Context) error { return errors.New("503 Service Unavailable") })

	var re *retry.Error
	if errors.As(err, &re) {
		switch re.Outcome {
		case retry.OutcomeExhausted, retry.OutcomeMaxElapsed, retry.OutcomeDeadline, retry.OutcomeRefused:
			fmt.Printf("not done: %d dead letter to redrive once the cause is fixed\n", sink.Len())
		case retry.OutcomeUnknown:
			fmt.Println("may have been done: look it up by its idempotency key before anything else")
		case retry.OutcomePermanent:
			fmt.Println("refused as it is: fix the data first, a redrive would fail again")
		case retry.OutcomeHandedOff, retry.OutcomeCanceled:
			fmt.Println("nothing to compensate: a queue runs the rest, or the caller stopped it")
		}
	}
	// Output:
	// not done: 1 dead letter to redrive once the cause is fixed
}

// A read that gave up may serve a default, such as the last value read,
// when the downstream could not answer; a read changed nothing, so an
// unknown outcome is as good as a failure. A permanent error is the
// downstream's answer (a 404: there is no such item), not an outage, and
// gets no default; nor does a cancelled call, whose caller has gone.
func Example_fallbackDefaultForRead() {
	r, _ := retry.New(retry.WithBackoff(retry.Constant(0)))
	const lastPrice = 9.99 // from a cache
	for _, failure := range []error{errors.New("503 Service Unavailable"), retry.Permanent(errors.New("404 Not Found"))} {
		price, err := retry.DoValueOn(context.Background(), r, func(context.Context) (float64, error) { return 0, failure })
		var re *retry.Error
		if errors.As(err, &re) {
			switch re.Outcome {
			case retry.OutcomeExhausted, retry.OutcomeMaxElapsed, retry.OutcomeDeadline, retry.OutcomeRefused, retry.OutcomeUnknown:
				price, err = lastPrice, nil
			}
		}
		fmt.Println(price, err)
	}
	// Output:
	// 9.99 <nil>
	// 0 retry: permanent error after 1 attempt: 404 Not Found
}

// openBreaker is a circuit breaker that is open; retrygobreaker adapts a
// real one.
type openBreaker struct{}

func (openBreaker) Allow() (func(error), error) { return nil, overload.ErrCircuitOpen }

// An optional part of a page degrades behind a breaker: while it is open,
// calls are refused (OutcomeRefused) without reaching the downstream, and
// the page goes out without that part, as after any failure of the
// downstream; a permanent error is a bug to see, not to hide.
func Example_fallbackDegradeBehindBreaker() {
	r, _ := retry.New(retry.WithOverload(&retry.OverloadOptions{Breaker: openBreaker{}}))
	calls := 0
	err := r.Do(context.Background(), func(context.Context) error { calls++; return nil })
	page := "product page with recommendations"
	var re *retry.Error
	if errors.As(err, &re) {
		switch re.Outcome {
		case retry.OutcomeRefused, retry.OutcomeExhausted, retry.OutcomeMaxElapsed, retry.OutcomeDeadline, retry.OutcomeUnknown:
			page = "product page without recommendations"
		} // OutcomePermanent, OutcomeCanceled: the page fails with err
	}
	fmt.Printf("%s (circuit open: %v, calls of fn: %d)\n", page, errors.Is(err, overload.ErrCircuitOpen), calls)
	// Output:
	// product page without recommendations (circuit open: true, calls of fn: 0)
}
