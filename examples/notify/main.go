// Command notify runs the job the retry library was designed from: a
// background worker that sends notifications through a flaky third-party
// push service.
//
//	go run ./examples/notify                  # 2,000 jobs, no services needed
//	go run ./examples/notify -pause=false     # no shared pause: more 429s (see README.md)
//	go run ./examples/notify -fail-rate 0.6   # a bad day
//	go run ./examples/notify -limit           # a concurrency limit, which reads random failures as overload
//	go run ./examples/notify -redis 127.0.0.1:6379 -crash-at 500   # then run it again
//	go run ./examples/notify -deadline 100ms -at-least-once -service-dedup=false -service-rate 0 -pause=false   # jobs delivered twice
//	go run ./examples/notify -river postgres://postgres@127.0.0.1:5432/test &   # in River; a second process
//	go run ./examples/notify -river postgres://postgres@127.0.0.1:5432/test     # beside it shares the jobs
//
// Jobs are generated from -seed and sent by -workers workers from a bounded
// queue, through a simulated push service on a loopback HTTP server that
// fails transiently (timeouts, 502, 503, 429 with Retry-After), answers
// 429 with Retry-After over its rate (-service-rate), and fails
// permanently (empty message: 400, invalid user ID: 404). One shared policy
// (newRetrier) classifies the failures, retries with exponential backoff
// and full jitter through retryhttp, holds every job while a 429's
// Retry-After runs (an overload.Pause; -pause=false turns it off), makes
// each send idempotent with a send log keyed by job ID (memstore,
// redisstore or pgstore), sends the job ID
// as the Idempotency-Key header, by which the service deduplicates as
// Stripe's API does (-service-dedup=false turns that off; -at-least-once,
// which sends a job whose outcome is unknown again, shows why it must),
// puts every job that gives up in a dead-letter store (a JSON Lines file or
// pgdeadletter), counts with retrystats and retryprom, and logs with
// retryslog, without message text or user IDs. Time is virtual (see
// vclock.go): the same seed prints the same summary, in a few seconds.
//
// With -river the jobs are River jobs on PostgreSQL, worked by a River
// client through retryriver, in real time, by every process started with
// the same URL and seed (see river.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// realMain runs the command and returns its exit status: 0 done, 1
// failed, 2 bad flags, 3 the -crash-at exit.
func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	var usage *usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "notify: %v\nRun with -h for the flags.\n", err)
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "notify:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.resend {
		return resend(ctx, cfg, stdin, stdout, stderr)
	}
	e := env{stdout: stdout}
	if f, ok := stdout.(*os.File); ok {
		e.terminal = term.IsTerminal(int(f.Fd()))
	}
	if cfg.logPath == "-" {
		e.log = stderr
	}
	if _, err := run(ctx, cfg, e); err != nil {
		fmt.Fprintln(stderr, "notify:", err)
		return 1
	}
	return 0
}

// openLog truncates the log file at path, or creates it.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("-log: %w", err)
	}
	return f, nil
}
