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
		recs, err := s.list(ctx, o.filter)
		if err != nil {
			return err
		}
		return printList(stdout, stderr, recs, o.json)
	})
}

// printList prints recs as a table or as JSON Lines.
func printList(stdout, stderr io.Writer, recs []retry.DeadLetter, asJSON bool) error {
	if asJSON {
		return printJSONLines(stdout, recs)
	}
	if len(recs) == 0 {
		fmt.Fprintln(stderr, "no dead letters match")
		return nil
	}
	return printTable(stdout, recs)
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
			recs, err := s.list(ctx, f)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "dry run: purge would delete %d dead letters\n", len(recs))
			return printList(stdout, io.Discard, recs, false)
		}
		n, err := s.purge(ctx, f)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "purged %d dead letters\n", n)
		return nil
	})
}

// pendingOnly returns f for redrive, which takes pending records only.
func pendingOnly(f deadletter.Filter) (deadletter.Filter, error) {
	if f.State == deadletter.Redriven {
		return f, usageError("redrive replays pending records only; -state redriven selects none")
	}
	f.State = deadletter.Pending
	return f, nil
}
