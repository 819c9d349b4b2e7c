package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
)

// options are the flags of all commands; each command defines the ones
// it takes.
type options struct {
	file, postgres, table string
	filter                deadletter.Filter
	filtered              bool // a filter flag was given
	json, dryRun, all     bool
	exec                  string
	attempts              int
	backoff, timeout      time.Duration
	ids                   []string // the positional arguments
}

// Flag groups a command can take.
const (
	withFilter = 1 << iota
	withJSON
	withDryRun
	withRedrive
	withAll
)

// parseFlags parses a command's arguments, flags and IDs in any order.
// now anchors durations such as -since 24h.
func parseFlags(name string, args []string, groups int, now time.Time) (*options, error) {
	o := &options{table: pgdeadletter.DefaultTable}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints the usage itself
	fs.StringVar(&o.file, "file", "", "the `PATH` of a JSON Lines file written by deadletter.FileSink")
	fs.StringVar(&o.postgres, "postgres", "", "a PostgreSQL `URL` (or connection string), for a table written by pgdeadletter.Sink")
	fs.StringVar(&o.table, "table", pgdeadletter.DefaultTable, "the table's `NAME`, with -postgres")
	if groups&withFilter != 0 {
		o.defineFilter(fs, now)
	}
	if groups&withJSON != 0 {
		fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	}
	if groups&withDryRun != 0 {
		fs.BoolVar(&o.dryRun, "dry-run", false, "list the records and change nothing")
	}
	if groups&withAll != 0 {
		fs.BoolVar(&o.all, "all", false, "purge every record")
	}
	if groups&withRedrive != 0 {
		fs.StringVar(&o.exec, "exec", "", "the shell `COMMAND` that replays a record")
		fs.IntVar(&o.attempts, "attempts", 3, "attempts per record, the first included")
		fs.DurationVar(&o.backoff, "backoff", time.Second, "the first wait between attempts")
		fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long one attempt may run")
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequested{usage: commandHelp(name, fs, groups&withFilter != 0)}
			}
			return nil, usageError("%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		o.ids = append(o.ids, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case o.file == "" && o.postgres == "":
		return nil, usageError("say where the dead letters are: -file PATH or -postgres URL")
	case o.file != "" && o.postgres != "":
		return nil, usageError("-file and -postgres exclude each other")
	case o.file != "" && o.table != pgdeadletter.DefaultTable:
		return nil, usageError("-table goes with -postgres, not -file")
	case o.table == "":
		// pgdeadletter.Options.Table "" is the default table; an empty
		// -table (an unset variable, say) must not purge or redrive that.
		return nil, usageError("-table: the table name is empty (leave -table out for %s)", pgdeadletter.DefaultTable)
	}
	if err := o.filter.Validate(); err != nil {
		return nil, usageError("%v", err)
	}
	return o, nil
}

// commandHelp is the usage of the command name, whose flags fs defines.
func commandHelp(name string, fs *flag.FlagSet, filters bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n%s", commandUsage[name], usageStore)
	if filters {
		b.WriteString(usageFilters)
	}
	b.WriteString("\nflags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	b.WriteString("\nRun 'deadletters help' for the details.\n")
	return b.String()
}

// reasons are the names of the failure outcomes, the reasons a record
// can have: every retry.Outcome but success and handed-off (not a
// failure), up to the last, whose successor has no name.
func reasons() []string {
	var names []string
	for o := retry.OutcomeSuccess + 1; ; o++ {
		name, err := o.MarshalText()
		if err != nil {
			return names
		}
		if o != retry.OutcomeHandedOff {
			names = append(names, string(name))
		}
	}
}

// defineFilter defines the filter flags, which set o.filter.
func (o *options) defineFilter(fs *flag.FlagSet, now time.Time) {
	set := func(parse func(string) error) func(string) error {
		return func(s string) error {
			o.filtered = true
			return parse(s)
		}
	}
	fs.Func("name", "the operation's `NAME`, exactly", set(func(s string) error {
		if s == "" {
			return errors.New("empty name")
		}
		o.filter.Name = s
		return nil
	}))
	fs.Func("reason", "a `LIST` of reasons, comma-separated: "+strings.Join(reasons(), ", "), set(func(s string) error {
		for r := range strings.SplitSeq(s, ",") {
			var out retry.Outcome
			if err := out.UnmarshalText([]byte(strings.TrimSpace(r))); err != nil || out == retry.OutcomeSuccess {
				all := reasons()
				return fmt.Errorf("unknown reason %q: use %s or %s", r, strings.Join(all[:len(all)-1], ", "), all[len(all)-1])
			}
			o.filter.Reasons = append(o.filter.Reasons, out)
		}
		return nil
	}))
	fs.Func("since", "gave up at or after `T`", set(func(s string) (err error) {
		o.filter.Since, err = parseTime(s, now)
		return err
	}))
	fs.Func("until", "gave up before `T`", set(func(s string) (err error) {
		o.filter.Until, err = parseTime(s, now)
		return err
	}))
	fs.Func("state", "the records' state `S`: pending, redriven or all", set(func(s string) error {
		switch s {
		case "pending":
			o.filter.State = deadletter.Pending
		case "redriven":
			o.filter.State = deadletter.Redriven
		case "all":
			o.filter.State = deadletter.AnyState
		default:
			return fmt.Errorf("unknown state %q: use pending, redriven or all", s)
		}
		return nil
	}))
	fs.Func("limit", "at most `N` records, the oldest first", set(func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("limit %q is not a positive number", s)
		}
		o.filter.Limit = n
		return nil
	}))
}

// parseTime reads an RFC 3339 time, a date (UTC midnight), or a duration
// before now such as 90m, 24h or 7d.
func parseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		var n int
		if n, err = strconv.Atoi(days); err == nil && n <= 1e5 {
			d = time.Duration(n) * 24 * time.Hour
		} else {
			err = errors.New("bad days")
		}
	}
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is not a time: use RFC 3339 (2026-11-29T08:00:00Z), a date (2026-11-29) or a duration ago (24h, 7d)", s)
	}
	return now.Add(-d), nil
}
