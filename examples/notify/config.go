package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// config is what the flags set.
type config struct {
	jobs, workers, queue int
	// failRate is the share of attempts that fail transiently (timeouts,
	// 502, 503, 429); permanentRate the share of jobs that can never be
	// sent (empty message, invalid user ID); redeliverRate the share of
	// jobs the queue delivers twice (an acknowledgement lost, as when a
	// visibility timeout runs out).
	failRate, permanentRate, redeliverRate float64
	// noBudget runs without the shared retry budget: every job may make
	// all its attempts, whatever the others see.
	noBudget bool
	// limit gives the push service's Retrier a concurrency limit
	// (overload.Adaptive) shared by every job: each attempt holds a
	// permit while its request is out, in virtual time.
	limit bool
	// pause gives the push service's Retrier an overload.Pause shared by
	// every job: a 429's Retry-After holds them all until then.
	pause bool
	// serviceRate is the requests per second of virtual time the push
	// service answers before it answers 429; 0: no limit.
	serviceRate int
	// atLeastOnce sets IdempotencyOptions.AtLeastOnce: a redelivery of a
	// job whose outcome is unknown sends it again once its lease (30s)
	// has run out, instead of replaying the unknown outcome.
	atLeastOnce     bool
	seed            uint64
	deadline        time.Duration // per job, on its virtual clock
	crashAt         int           // exit after this many sends; 0: never
	redis, postgres string
	// river is the PostgreSQL URL of -river: the jobs are River jobs
	// there, and postgres is set to it (the idempotency keys and dead
	// letters are in the same database).
	river string
	// handOff runs each -river job as one call of Do, whose waits of
	// handOffThreshold or more go back to River (retry.WithHandOff).
	handOff      bool
	namespace    string // Redis key prefix and PostgreSQL table prefix
	fresh        bool
	metrics      string
	deadLetters  string // the JSON Lines file, unless -postgres
	logPath      string // "-": standard error
	logLevel     slog.Level
	deliveries   string // the push service's record of deliveries; "" for none
	serviceDedup bool   // the push service deduplicates by the Idempotency-Key header
	resend       bool
}

// namespaceRE keeps -namespace usable as a Redis key prefix and as the
// start of a PostgreSQL table name.
var namespaceRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

// usageError is the error of a bad command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// parseFlags reads the command line. -h gives flag.ErrHelp, after the
// usage is written to stderr; any other problem a *usageError that names
// it.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("notify", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by main
	fs.IntVar(&c.jobs, "jobs", 2000, "notification jobs to generate")
	fs.IntVar(&c.workers, "workers", 8, "workers sending jobs concurrently")
	fs.IntVar(&c.queue, "queue", 64, "capacity of the job queue (a bounded channel)")
	fs.Float64Var(&c.failRate, "fail-rate", 0.3, "share of attempts that fail transiently, at random: timeout, 502, 503, 429 with Retry-After (0 to 1)")
	fs.IntVar(&c.serviceRate, "service-rate", defaultServiceRate, "requests per second of virtual time the push service takes; over it, it answers 429 with Retry-After in whole seconds (0: no limit; -river, in real time, has none)")
	fs.BoolVar(&c.pause, "pause", true, "an overload.Pause on the push service shared by every job: a 429's Retry-After holds every job's next attempt, first attempts too, until then; -pause=false: only the job that got it waits")
	fs.Float64Var(&c.permanentRate, "permanent-rate", 0.02, "share of jobs that fail permanently: empty message or invalid user ID (0 to 1)")
	fs.Float64Var(&c.redeliverRate, "redeliver-rate", 0.05, "share of jobs the queue delivers twice, as after a lost acknowledgement (0 to 1)")
	fs.BoolVar(&c.noBudget, "no-budget", false, "no shared retry budget: every job makes all its attempts (the summary is then the same for a seed at any -fail-rate)")
	fs.BoolVar(&c.limit, "limit", false, "a concurrency limit on the push service shared by every job (overload.NewAdaptive: 20 to start, AIMD on the failures, FailedShare -fail-rate plus 0.2): each attempt holds a permit while its request is out, and one refused ends its job, counted beside the budget's refusals")
	fs.BoolVar(&c.atLeastOnce, "at-least-once", false, "IdempotencyOptions.AtLeastOnce: a redelivery of a job whose outcome is unknown (its deadline passed while the request was out) sends it again once the idempotency lease has run out, instead of replaying the unknown outcome; memory store only")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the jobs, the failures and the jitter: the same seed gives the same summary")
	fs.DurationVar(&c.deadline, "deadline", defaultDeadline, "each job's context deadline, on its virtual clock")
	fs.IntVar(&c.crashAt, "crash-at", 0, "exit abruptly (os.Exit) after this many sends, to rerun with the same seed; needs -redis or -postgres")
	fs.StringVar(&c.redis, "redis", "", "Redis `ADDR` (host:port): keep idempotency keys there (redisstore)")
	fs.StringVar(&c.postgres, "postgres", "", "PostgreSQL `URL`: keep idempotency keys (pgstore) and dead letters (pgdeadletter) there")
	fs.StringVar(&c.river, "river", "", "PostgreSQL `URL`: queue the jobs in River there (schema NAME_river, migrated on start) and work them with a River client, keys (pgstore) and dead letters (pgdeadletter) in the same database; processes started with the same URL and -seed share the jobs")
	fs.BoolVar(&c.handOff, "handoff", false, "with -river: each job is one call of Do in its River job (retryriver.NewHandOffWorker), which waits in memory, but hands each wait of 1s or more (a Retry-After) back to River as a job due at its end, which any process goes on with (retry.WithHandOff)")
	fs.StringVar(&c.namespace, "namespace", "notify", "Redis key prefix NAME:idem: and PostgreSQL tables NAME_idempotency, NAME_dead_letters (and, with -river, schema NAME_river and table NAME_push_deliveries)")
	fs.BoolVar(&c.fresh, "fresh", false, "with -redis or -postgres, forget the idempotency keys of earlier runs first")
	fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics on `ADDR` (such as :9090) while the jobs run")
	fs.StringVar(&c.deadLetters, "dead-letters", filepath.Join(os.TempDir(), "notify-deadletters.jsonl"), "the dead-letter `FILE` (JSON Lines, appended to), unless -postgres")
	fs.StringVar(&c.logPath, "log", filepath.Join(os.TempDir(), "notify.log"), "where the retry log goes (slog, JSON); - for standard error")
	level := fs.String("log-level", "debug", "lowest level logged: debug (retries), info, warn (permanent failures), error (exhausted)")
	fs.StringVar(&c.deliveries, "deliveries", "", "append each job ID the push service delivers to `FILE`, a record that outlives a crash")
	fs.BoolVar(&c.serviceDedup, "service-dedup", true, "the push service delivers at most once per Idempotency-Key header (the job ID), as Stripe's API does; -service-dedup=false delivers every request it accepts")
	fs.BoolVar(&c.resend, "resend", false, "send the one job on standard input (a dead letter's payload) and exit: for deadletters redrive -exec")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stderr, fs)
			return c, err
		}
		return c, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return c, usagef("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, usagef("-log-level %q: want debug, info, warn or error", *level)
	}
	if c.river != "" && c.postgres == "" {
		c.postgres = c.river
	}
	return c, c.validate()
}

// validate checks the values that the flag package accepts but the run
// cannot use.
func (c *config) validate() error {
	for _, r := range [...]struct {
		name string
		v    float64
	}{{"-fail-rate", c.failRate}, {"-permanent-rate", c.permanentRate}, {"-redeliver-rate", c.redeliverRate}} {
		if !(r.v >= 0 && r.v <= 1) { // also false for NaN
			return usagef("%s %v: a share, from 0 to 1", r.name, r.v)
		}
	}
	switch {
	case c.jobs < 1 || c.jobs > maxJobs:
		return usagef("-jobs %d: from 1 to %d", c.jobs, maxJobs)
	case c.workers < 1 || c.workers > 1024:
		return usagef("-workers %d: from 1 to 1024", c.workers)
	case c.queue < 1 || c.queue > 1<<20:
		return usagef("-queue %d: from 1 to %d", c.queue, 1<<20)
	case c.serviceRate < 0 || c.serviceRate > 1_000_000:
		return usagef("-service-rate %d: from 0 (no limit) to 1000000", c.serviceRate)
	case c.deadline <= 0:
		return usagef("-deadline %v: must be positive", c.deadline)
	case c.crashAt < 0:
		return usagef("-crash-at %d: must not be negative (0: never)", c.crashAt)
	case c.crashAt > 0 && c.redis == "" && c.postgres == "":
		return usagef("-crash-at needs -redis or -postgres: the memory idempotency store dies with the process, so a rerun could not know what was sent")
	case c.atLeastOnce && (c.redis != "" || c.postgres != ""):
		return usagef("-at-least-once goes with the memory store only: Redis and PostgreSQL measure the idempotency lease (30s) in real time, which a run of a few seconds does not run out, so a redelivery a virtual minute later would still find the lease held")
	case c.river != "" && c.postgres != c.river:
		return usagef("-river and -postgres name two databases: with -river the idempotency keys and dead letters are in River's database (leave -postgres out)")
	case c.river != "" && c.redis != "":
		return usagef("-river keeps the idempotency keys in River's database (pgstore): leave -redis out")
	case c.river != "" && c.crashAt > 0:
		return usagef("-crash-at goes without -river: stop a -river process (Ctrl-C) and start it again, River keeps the jobs")
	case c.limit && c.river != "":
		return usagef("-limit goes without -river: River's workers run in real time, where what the limit refuses changes from run to run; the summary's count of its refusals is the virtual timeline's")
	case c.handOff && c.river == "":
		return usagef("-handoff goes with -river: the waits are handed off to River")
	case c.river != "" && c.resend:
		return usagef("-resend goes without -river: a dead letter of a River job redrives by inserting the job again")
	case c.fresh && c.redis == "" && c.postgres == "":
		return usagef("-fresh goes with -redis or -postgres: the memory store starts empty anyway")
	case !namespaceRE.MatchString(c.namespace):
		return usagef("-namespace %q: 1 to 31 lower-case letters, digits or _, starting with a letter", c.namespace)
	case c.deadLetters == "" && c.postgres == "":
		return usagef("-dead-letters: give a file (or -postgres)")
	case c.logPath == "":
		return usagef("-log: give a file, or - for standard error")
	}
	for _, a := range [...]struct{ flag, addr string }{{"-redis", c.redis}, {"-metrics", c.metrics}} {
		if a.addr == "" {
			continue
		}
		_, port, err := net.SplitHostPort(a.addr)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			return usagef("%s %q: want HOST:PORT or :PORT", a.flag, a.addr)
		}
	}
	if c.postgres != "" {
		if _, err := pgxpool.ParseConfig(c.postgres); err != nil {
			// pgx's message may quote the URL, password and all.
			return usagef("-postgres: not a PostgreSQL URL (postgres://user@host:5432/db) or connection string")
		}
	}
	return nil
}

// maxJobs bounds -jobs: every job's result stays in memory until the end.
const maxJobs = 10_000_000

func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage of notify: go run ./examples/notify [flags]

Sends generated notification jobs through a simulated, flaky push service
with the retry library: classification, backoff with jitter, an
idempotency store, dead letters, metrics and logs. Time is virtual: waits,
latencies and timeouts take no real time, and the same -seed prints the
same summary.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
