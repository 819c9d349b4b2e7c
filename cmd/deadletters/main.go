// Command deadletters lists, shows, redrives and purges the dead letters
// that github.com/steadfast-go/retry stored in a JSON Lines file
// (deadletter.FileSink) or a PostgreSQL table (pgdeadletter.Sink).
//
//	deadletters list    STORE [FILTERS] [-json]
//	deadletters show    STORE [-json] ID...
//	deadletters redrive STORE [FILTERS] -exec 'COMMAND' [-attempts N] [-backoff D] [-timeout D] [-dry-run]
//	deadletters purge   STORE [FILTERS] [-dry-run] [-all] [ID...]
//
// STORE is -file PATH or -postgres URL [-table NAME]; FILTERS are -name,
// -reason, -since, -until, -state and -limit. redrive runs COMMAND with
// /bin/sh once per attempt, with the record's payload on standard input
// and the record in DEADLETTER_* environment variables; exit status 0 is
// success. Each record is marked before its replay, so none is replayed
// twice, and a replay that fails again becomes a new pending record.
//
// The manual is README.md beside this file; 'deadletters help' prints it,
// and 'deadletters COMMAND -h' the command's usage and flags. Exit status:
// 0 on success (and for help), 1 on failure, 2 for a usage error.
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, redrive records the replay it cut short; a
	// second one kills the program as usual.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage:
  deadletters list    STORE [FILTERS] [-json]
  deadletters show    STORE [-json] ID...
  deadletters redrive STORE [FILTERS] -exec 'COMMAND' [-attempts N] [-backoff D] [-timeout D] [-dry-run]
  deadletters purge   STORE [FILTERS] [-dry-run] [-all] [ID...]

` + usageStore + usageFilters + `Run 'deadletters help' for the details.
`

const (
	usageStore   = "STORE:   -file PATH | -postgres URL [-table NAME]\n"
	usageFilters = "FILTERS: -name NAME -reason LIST -since T -until T -state pending|redriven|all -limit N\n"
)

// commandUsage is each command's line of the usage, for its -h.
var commandUsage = map[string]string{
	"list":    "deadletters list STORE [FILTERS] [-json]",
	"show":    "deadletters show STORE [-json] ID...",
	"redrive": "deadletters redrive STORE [FILTERS] -exec 'COMMAND' [-attempts N] [-backoff D] [-timeout D] [-dry-run]",
	"purge":   "deadletters purge STORE [FILTERS] [-dry-run] [-all] [ID...]",
}

// helpRequested is the error of a command's -h (or -help): its usage,
// which run prints to stdout, exiting 0.
type helpRequested struct{ usage string }

func (e *helpRequested) Error() string { return "help requested" }

// help is the manual.
//
//go:embed README.md
var help string

// usageErr is an error that is the caller's mistake: exit status 2.
type usageErr struct{ msg string }

func (e *usageErr) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return &usageErr{msg: fmt.Sprintf(format, args...)}
}

// run runs the command line args (without the program's name) and returns
// the exit status. It never panics on bad input and writes nothing to
// stdout on a usage error; list prints the records as it reads them, so
// a file that fails to read midway leaves the ones before on stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var cmd func(context.Context, []string, io.Writer, io.Writer) error
	switch args[0] {
	case "list":
		cmd = runList
	case "show":
		cmd = runShow
	case "redrive":
		cmd = runRedrive
	case "purge":
		cmd = runPurge
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, help)
		return exitOK
	default:
		fmt.Fprintf(stderr, "deadletters: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
	err := cmd(ctx, args[1:], stdout, stderr)
	var ue *usageErr
	var help *helpRequested
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &help):
		fmt.Fprint(stdout, help.usage)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "deadletters %s: %s\n%s", args[0], safeText(err.Error()), usage)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "deadletters %s: %s\n", args[0], safeText(err.Error()))
		return exitFail
	}
}
