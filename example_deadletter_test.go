package retry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/steadfast-go/retry"
)

func ExampleWithDeadLetter() {
	sink := retry.NewMemoryDeadLetterSink() // use OpenFileSink or a database in production
	r, err := retry.New(
		retry.WithDeadLetter(sink),
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

func ExampleRedrive() {
	ctx := context.Background()
	sink := retry.NewMemoryDeadLetterSink()
	r, _ := retry.New(retry.WithDeadLetter(sink), retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)))

	// While the mail server is down, the call gives up and is dead-lettered.
	send, _ := r.With(retry.WithName("send-invoice"), retry.WithPayload([]byte("invoice 42")))
	_ = send.Do(ctx, func(context.Context) error { return errors.New("smtp: connection refused") })

	// Once it is back, replay what was dead-lettered.
	report, err := retry.Redrive(ctx, sink, r, func(_ context.Context, dl retry.DeadLetter) error {
		fmt.Printf("replaying %s: %s\n", dl.Name, dl.Payload)
		return nil
	}, nil)
	fmt.Printf("%+v %v\n", report, err)

	// A second redrive finds nothing left to replay.
	report, err = retry.Redrive(ctx, sink, r, func(context.Context, retry.DeadLetter) error { return nil }, nil)
	fmt.Printf("%+v %v\n", report, err)
	// Output:
	// replaying send-invoice: invoice 42
	// {Pending:1 Skipped:0 Succeeded:1 Failed:0 NotRecorded:0} <nil>
	// {Pending:0 Skipped:0 Succeeded:0 Failed:0 NotRecorded:0} <nil>
}

func ExampleOpenFileSink() {
	dir, err := os.MkdirTemp("", "deadletters")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "deadletters.jsonl")

	sink, err := retry.OpenFileSink(path, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sink.Close()
	r, _ := retry.New(retry.WithDeadLetter(sink), retry.WithName("charge-card"), retry.WithBackoff(retry.Constant(0)))
	_ = r.Do(context.Background(), func(context.Context) error {
		return retry.Permanent(errors.New("card declined"))
	})

	recs, err := retry.ReadDeadLetterFile(path)
	if err != nil {
		fmt.Println(err) // a *TornRecordError still comes with every whole record
	}
	for _, dl := range recs {
		fmt.Printf("%s: %s after %d attempt: %s\n", dl.Name, dl.Reason, dl.Attempts, dl.LastError)
	}
	// Output:
	// charge-card: permanent after 1 attempt: card declined
}
