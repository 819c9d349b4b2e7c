package retryriver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/steadfast-go/retry"
)

// RedriveArgs returns the river.JobArgs of a dead letter that a [Worker]
// wrote: a job of kind dl.Name with dl.Payload as its encoded args, to
// insert again, which is how such a dead letter is redriven: the new job
// has a new ID, and so a new idempotency key by default. It returns an
// error wrapping [retry.ErrInvalidOption] if dl has no name or its
// payload is not a JSON object.
func RedriveArgs(dl retry.DeadLetter) (river.JobArgs, error) {
	if dl.Name == "" {
		return nil, fmt.Errorf("%w: retryriver: dead letter %s has no name, so no job kind", retry.ErrInvalidOption, dl.ID)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(dl.Payload, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: retryriver: the payload of dead letter %s is no job's args (a JSON object)", retry.ErrInvalidOption, dl.ID)
	}
	return rawArgs{kind: dl.Name, args: json.RawMessage(dl.Payload)}, nil
}

// rawArgs are encoded job args of a kind.
type rawArgs struct {
	kind string
	args json.RawMessage
}

func (a rawArgs) Kind() string                 { return a.kind }
func (a rawArgs) MarshalJSON() ([]byte, error) { return a.args, nil }

// Reinsert returns a handler for deadletter.Redrive that inserts each
// dead letter of a [Worker] again as a job, with client and opts (nil for
// the kind's defaults; River then puts the job in the default queue, since
// a dead letter does not keep the queue). A record that is no job
// ([RedriveArgs]) fails as a permanent error: redriving it again would
// not help.
func Reinsert[TTx any](client *river.Client[TTx], opts *river.InsertOpts) func(context.Context, retry.DeadLetter) error {
	return func(ctx context.Context, dl retry.DeadLetter) error {
		args, err := RedriveArgs(dl)
		if err != nil {
			return retry.Permanent(err)
		}
		_, err = client.Insert(ctx, args, opts)
		return err
	}
}
