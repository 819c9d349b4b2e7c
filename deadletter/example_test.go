package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

func ExampleRedrive() {
	ctx := context.Background()
	sink := deadletter.NewMemorySink()
	r, _ := retry.New(retry.WithDeadLetter(sink, nil), retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)))

	// While the mail server is down, the call gives up and is dead-lettered.
	send, _ := r.With(retry.WithName("send-invoice"), retry.WithPayload([]byte("invoice 42")))
	_ = send.Do(ctx, func(context.Context) error { return errors.New("smtp: connection refused") })

	// Once it is back, replay what was dead-lettered.
	report, err := deadletter.Redrive(ctx, sink, r, func(_ context.Context, dl retry.DeadLetter) error {
		fmt.Printf("replaying %s: %s\n", dl.Name, dl.Payload)
		return nil
	}, nil)
	fmt.Printf("%+v %v\n", report, err)

	// A second redrive finds nothing left to replay.
	report, err = deadletter.Redrive(ctx, sink, r, func(context.Context, retry.DeadLetter) error { return nil }, nil)
	fmt.Printf("%+v %v\n", report, err)
	// Output:
	// replaying send-invoice: invoice 42
	// {Pending:1 Skipped:0 Succeeded:1 Failed:0 Replayed:0 NotRecorded:0 Invalid:0} <nil>
	// {Pending:0 Skipped:0 Succeeded:0 Failed:0 Replayed:0 NotRecorded:0 Invalid:0} <nil>
}

func ExampleOpenFile() {
	dir, err := os.MkdirTemp("", "deadletters")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	sink, err := deadletter.OpenFile(filepath.Join(dir, "deadletters.jsonl"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sink.Close()
	r, _ := retry.New(retry.WithDeadLetter(sink, nil), retry.WithBackoff(retry.Constant(0)))
	for _, name := range []string{"charge-card", "send-invoice"} {
		call, _ := r.With(retry.WithName(name))
		_ = call.Do(context.Background(), func(context.Context) error {
			return retry.Permanent(errors.New(name + " failed"))
		})
	}

	recs, err := sink.List(context.Background(), deadletter.Filter{Name: "charge-card"})
	if err != nil {
		fmt.Println(err) // a *TornRecordError still comes with every whole record
	}
	for _, dl := range recs {
		fmt.Printf("%s: %s after %d attempt: %s\n", dl.Name, dl.Reason, dl.Attempts, dl.LastError)
	}
	n, err := sink.Purge(context.Background(), deadletter.Filter{Reasons: []retry.Outcome{retry.OutcomePermanent}})
	fmt.Println("purged:", n, err)
	// Output:
	// charge-card: permanent after 1 attempt: charge-card failed
	// purged: 2 <nil>
}

// Func makes a function a sink, here one that fails, as a broken
// connection to a queue would.
func ExampleFunc() {
	down := deadletter.Func(func(context.Context, retry.DeadLetter) error { return errors.New("queue unreachable") })
	err := retry.Do(context.Background(), func(context.Context) error { return retry.Permanent(errors.New("card declined")) },
		retry.WithDeadLetter(down, nil))
	fmt.Println(errors.Is(err, retry.ErrDeadLetterNotRecorded))
	// Output:
	// true
}
