package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// maxBackoff caps the waits between the attempts of one replay.
const maxBackoff = 30 * time.Second

func runRedrive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withStore(ctx, "redrive", args, withFilter|withDryRun|withRedrive, stderr, func(o *options, s store) error {
		if len(o.ids) > 0 {
			return usageError("redrive takes no arguments, only flags: %q", o.ids[0])
		}
		f, err := pendingOnly(o.filter)
		if err != nil {
			return err
		}
		if o.dryRun {
			n, err := printList(ctx, stdout, s, f, false)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "dry run: redrive would replay %d dead letters\n", n)
			return nil
		}
		if o.exec == "" {
			return usageError("redrive needs -exec 'COMMAND', run once per record with its payload on standard input")
		}
		r, err := retry.New(
			retry.WithMaxAttempts(o.attempts),
			retry.WithBackoff(retry.Exponential(o.backoff, 2, max(o.backoff, maxBackoff))),
			retry.WithMaxDelay(max(o.backoff, maxBackoff)),
			retry.WithAttemptTimeout(o.timeout),
		)
		if err != nil {
			return usageError("%v", err)
		}
		src, err := s.source(ctx)
		if err != nil {
			return err
		}
		taken := 0
		filter := func(dl retry.DeadLetter) bool {
			if !f.Match(dl) || (f.Limit > 0 && taken >= f.Limit) {
				return false
			}
			taken++
			return true
		}
		rep, err := deadletter.Redrive(ctx, pendingSource{src, s, f}, r, execHandler(o.exec, stderr), filter)
		fmt.Fprintf(stdout, "redrive: %d pending, %d skipped (taken by another redrive), %d succeeded, %d failed again (stored as new dead letters), %d failed and not stored\n",
			rep.Pending, rep.Skipped, rep.Succeeded, rep.Failed, rep.NotRecorded)
		if err != nil {
			return err
		}
		if rep.Failed > 0 {
			return fmt.Errorf("%d replays failed; list them with -state pending", rep.Failed)
		}
		return nil
	})
}

// execHandler replays a record by running command with /bin/sh, the
// payload on its standard input and the record in its environment. Its
// output goes to out. Redrive calls it once per attempt, one record at a
// time.
func execHandler(command string, out io.Writer) func(context.Context, retry.DeadLetter) error {
	var (
		last    string
		attempt int
	)
	return func(ctx context.Context, dl retry.DeadLetter) error {
		if dl.ID != last {
			last, attempt = dl.ID, 0
		}
		attempt++
		meta := dl
		meta.Payload = nil // on stdin; an environment variable has a size limit
		js, err := json.Marshal(meta)
		if err != nil {
			return retry.Permanent(err)
		}
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
		cmd.Stdin = bytes.NewReader(dl.Payload)
		// One writer for both, so that exec writes to out from one
		// goroutine at a time.
		tail := &tailWriter{}
		w := io.MultiWriter(out, tail)
		cmd.Stdout, cmd.Stderr = w, w
		cmd.Env = append(os.Environ(),
			"DEADLETTER_ID="+dl.ID,
			"DEADLETTER_NAME="+dl.Name,
			"DEADLETTER_IDEMPOTENCY_KEY="+dl.IdempotencyKey,
			"DEADLETTER_ATTEMPT="+strconv.Itoa(attempt),
			"DEADLETTER_JSON="+string(js),
		)
		// A child that keeps the output open must not hang redrive.
		cmd.WaitDelay = time.Second
		err = cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			fmt.Fprintf(out, "deadletters: %s attempt %d: ok\n", oneLine(dl.ID, math.MaxInt), attempt)
			return nil
		case ctx.Err() != nil:
			err = fmt.Errorf("%s: %w", err, context.Cause(ctx))
		case !errors.As(err, &exit):
			// The shell could not start: no later attempt would differ.
			err = retry.Permanent(err)
		case tail.lastLine() != "":
			// The new dead letter's LastError says why, not just "exit
			// status 1".
			err = fmt.Errorf("%w: %s", err, tail.lastLine())
		}
		fmt.Fprintf(out, "deadletters: %s attempt %d: %s\n", oneLine(dl.ID, math.MaxInt), attempt, oneLine(err.Error(), math.MaxInt))
		return err
	}
}

// tailWriter keeps the last bytes written to it.
type tailWriter struct{ buf []byte }

// tailSize is how much of a command's output tailWriter keeps.
const tailSize = 512

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

// lastLine returns the last non-empty line written, made fit for one line
// of an error message.
func (t *tailWriter) lastLine() string {
	s := strings.TrimRight(string(t.buf), " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return oneLine(strings.ToValidUTF8(s, "\uFFFD"), 200)
}
