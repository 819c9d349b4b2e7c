package retryriver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/steadfast-go/retry"
)

// RedriveArgs returns the river.JobArgs of a [Worker]'s dead letter, kind
// dl.Name with dl.Payload as encoded args, to insert again (a new ID, so
// by default a new key). An error wrapping [retry.ErrInvalidOption] means
// dl has no name or its payload is not a JSON object.
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

// Reinsert returns a deadletter.Redrive handler that inserts each
// [Worker] dead letter again with client and opts (nil: the kind's
// defaults, in the default queue, as a record keeps no queue). A record
// that is no job ([RedriveArgs]) fails as a permanent error.
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
