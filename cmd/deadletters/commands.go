package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// withStore parses args, opens the store and calls fn with both.
func withStore(ctx context.Context, name string, args []string, groups int, stderr io.Writer, fn func(*options, store) error) error {
	o, err := parseFlags(name, args, groups, time.Now())
	if err != nil {
		return err
	}
	s, err := openStore(ctx, o, stderr)
	if err != nil {
		return err
	}
	err = fn(o, s)
	if cerr := s.close(); err == nil {
		err = cerr
	}
	return err
}

func runList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withStore(ctx, "list", args, withFilter|withJSON, stderr, func(o *options, s store) error {
		if len(o.ids) > 0 {
			return usageError("list takes no arguments, only flags: %q", o.ids[0])
		}
		n, err := printList(ctx, stdout, s, o.filter, o.json)
		if err == nil && n == 0 && !o.json {
			fmt.Fprintln(stderr, "no dead letters match")
		}
		return err
	})
}

// printList prints the records of s that f selects as a table or as JSON
// Lines, as they come, and returns how many it printed.
func printList(ctx context.Context, stdout io.Writer, s store, f deadletter.Filter, asJSON bool) (int, error) {
	n := 0
	if asJSON {
		enc := json.NewEncoder(stdout)
		return n, s.each(ctx, f, func(dl retry.DeadLetter) error { n++; return enc.Encode(dl) })
	}
	t := newTable(stdout)
	err := s.each(ctx, f, func(dl retry.DeadLetter) error { n++; return t.row(dl) })
	if ferr := t.flush(); err == nil {
		err = ferr
	}
	return n, err
}

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withStore(ctx, "show", args, withJSON, stderr, func(o *options, s store) error {
		if len(o.ids) == 0 {
			return usageError("show needs the ID of a record")
		}
		var missing []error
		for i, id := range o.ids {
			dl, err := s.get(ctx, id)
			if errors.Is(err, errNotFound) {
				missing = append(missing, err)
				continue
			}
			if err != nil {
				return err
			}
			if o.json {
				b, err := json.MarshalIndent(dl, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%s\n", b)
				continue
			}
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			if err := printRecord(stdout, dl); err != nil {
				return err
			}
		}
		return errors.Join(missing...)
	})
}

func runPurge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withStore(ctx, "purge", args, withFilter|withDryRun|withAll, stderr, func(o *options, s store) error {
		f := o.filter
		f.IDs = o.ids
		narrowed := o.filtered || len(o.ids) > 0
		switch {
		case !narrowed && !o.all:
			return usageError("purge needs IDs or a filter (-name, -reason, -since, -until, -state, -limit), or -all to delete every record")
		case narrowed && o.all:
			return usageError("-all purges every record: give either -all or IDs and filters")
		}
		if o.dryRun {
			n, err := printList(ctx, stdout, s, f, false)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "dry run: purge would delete %d dead letters\n", n)
			return nil
		}
		n, err := s.purge(ctx, f)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "purged %d dead letters\n", n)
		return nil
	})
}

// pendingSource is a store as the Source of a redrive of the records f
// selects: its ScanPending passes those alone, from the store's each, so
// that Redrive reads a file one record at a time and skipped records are
// warned of. Its Pending, which Redrive does not call, collects the
// same records.
type pendingSource struct {
	deadletter.Source
	s store
	f deadletter.Filter
}

var _ deadletter.PendingScanner = pendingSource{}

func (p pendingSource) ScanPending(ctx context.Context, fn func(retry.DeadLetter) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.s.each(ctx, p.f, fn)
}

func (p pendingSource) Pending(ctx context.Context) ([]retry.DeadLetter, error) {
	var recs []retry.DeadLetter
	err := p.ScanPending(ctx, func(dl retry.DeadLetter) error {
		recs = append(recs, dl)
		return nil
	})
	return recs, err
}

// pendingOnly returns f for redrive, which takes pending records only.
func pendingOnly(f deadletter.Filter) (deadletter.Filter, error) {
	if f.State == deadletter.Redriven {
		return f, usageError("redrive replays pending records only; -state redriven selects none")
	}
	f.State = deadletter.Pending
	return f, nil
}
