package retry_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

func ExampleWithDeadLetter() {
	sink := deadletter.NewMemorySink() // use deadletter.OpenFile or a database in production
	r, err := retry.New(
		retry.WithDeadLetter(sink, nil),
		retry.WithMaxAttempts(3),
		retry.WithBackoff(retry.Constant(0)), // no waits, for the example
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	call, _ := r.With(retry.WithName("send-invoice"), retry.WithPayload([]byte(`{"invoice":42}`)))
	err = call.Do(context.Background(), func(context.Context) error {
		return errors.New("smtp: connection refused")
	})
	fmt.Println(err)
	fmt.Println("dead letter not recorded:", errors.Is(err, retry.ErrDeadLetterNotRecorded))

	for _, dl := range sink.Records() {
		fmt.Printf("%s %s after %d attempts: %s, payload %s\n", dl.Name, dl.Reason, dl.Attempts, dl.LastError, dl.Payload)
	}
	// Output:
	// retry: attempts exhausted after 3 attempts: smtp: connection refused
	// dead letter not recorded: false
	// send-invoice exhausted after 3 attempts: smtp: connection refused, payload {"invoice":42}
}
