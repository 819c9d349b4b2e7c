package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryslog"
)

// resend sends the one job whose JSON is on stdin: the payload of a dead
// letter, for deadletters redrive -exec 'go run ./examples/notify -resend'.
// It runs the same policy, under the job's idempotency key, so with -redis
// or -postgres a job that was sent meanwhile is not sent again. It writes
// no dead letter: deadletters redrive records a replay that fails.
// Exit status: 0 sent (or sent before), 1 not sent, 2 bad input.
func resend(ctx context.Context, cfg config, stdin io.Reader, stdout, stderr io.Writer) int {
	body, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
	var j job
	if err == nil {
		err = json.Unmarshal(body, &j)
	}
	if err != nil || j.ID == "" {
		fmt.Fprintln(stderr, "notify -resend: standard input is not a notification job (the payload of a dead letter)")
		return 2
	}
	j.body = body // the payload as it was: its fingerprint must match the key's

	b, err := openBackends(ctx, cfg, false)
	if err != nil {
		fmt.Fprintln(stderr, "notify -resend:", err)
		return 1
	}
	defer b.close()
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	shared, err := newRetrier(deps{store: b.store, atLeastOnce: cfg.atLeastOnce, observers: []retry.Observer{retryslog.New(logger, &retryslog.Options{RetryLevel: slog.LevelDebug})}})
	if err != nil {
		fmt.Fprintln(stderr, "notify -resend:", err)
		return 1
	}
	// Each redrive meets a service in a new state: its failures follow
	// the dead letter's ID, not the original run's sequence.
	h := fnv.New64a()
	h.Write([]byte(os.Getenv("DEADLETTER_ID")))
	svc, err := newService(cfg.seed^h.Sum64(), cfg.failRate, cfg.serviceDedup, cfg.deliveries)
	if err != nil {
		fmt.Fprintln(stderr, "notify -resend:", err)
		return 1
	}
	url, stop, err := svc.start()
	if err != nil {
		fmt.Fprintln(stderr, "notify -resend:", err)
		return 1
	}
	defer stop()
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	r := &runner{cfg: cfg, shared: shared, base: base, url: url + "/v1/push", tl: newTimeline(time.Now(), b.storeClock)}
	wake := r.tl.join()
	r.tl.start()
	<-wake
	res := r.send(ctx, delivery{job: &j, n: 1})
	r.tl.leave()
	switch {
	case res.unhandled != nil:
		fmt.Fprintln(stderr, "notify -resend:", res.unhandled)
		return 1
	case res.replayed && res.done.Outcome == retry.OutcomeSuccess:
		fmt.Fprintf(stdout, "%s: sent before (the idempotency store says so): not sent again\n", j.Type)
		return 0
	case res.done.Outcome == retry.OutcomeSuccess:
		fmt.Fprintf(stdout, "%s: sent after %d attempt(s)\n", j.Type, res.done.Attempts)
		return 0
	case res.replayed:
		fmt.Fprintf(stderr, "%s: failed permanently before (the idempotency store says so)\n", j.Type)
	case res.status != 0:
		fmt.Fprintf(stderr, "%s: %v after %d attempt(s), last status %d %s\n", j.Type, res.done.Outcome, res.done.Attempts, res.status, http.StatusText(res.status))
	default:
		fmt.Fprintf(stderr, "%s: %v after %d attempt(s): %v\n", j.Type, res.done.Outcome, res.done.Attempts, res.done.Err)
	}
	return 1
}
