package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/steadfast-go/retry"
)

// maxErrorWidth is how much of the last error a table row shows.
const maxErrorWidth = 60

// printTable prints one row per record.
func printTable(w io.Writer, recs []retry.DeadLetter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tREASON\tATTEMPTS\tGAVE UP\tSTATE\tLAST ERROR")
	for _, dl := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", oneLine(dl.ID, math.MaxInt), orDash(oneLine(dl.Name, 40)), dl.Reason,
			dl.Attempts, formatTime(dl.GaveUp), state(dl), orDash(oneLine(dl.LastError, maxErrorWidth)))
	}
	return tw.Flush()
}

// printJSONLines prints one record per line, as a FileSink writes them.
func printJSONLines(w io.Writer, recs []retry.DeadLetter) error {
	enc := json.NewEncoder(w)
	for _, dl := range recs {
		if err := enc.Encode(dl); err != nil {
			return err
		}
	}
	return nil
}

// printRecord prints every field of dl.
func printRecord(w io.Writer, dl retry.DeadLetter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// Records hold untrusted text: control characters, such as terminal
	// escapes, are printed as spaces.
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, oneLine(value, math.MaxInt)) }
	field("ID", dl.ID)
	field("Name", orDash(dl.Name))
	field("Reason", dl.Reason.String())
	field("Attempts", strconv.Itoa(dl.Attempts))
	field("First attempt", formatTime(dl.FirstAttempt))
	field("Gave up", formatTime(dl.GaveUp))
	st := state(dl)
	if !dl.Redriven.IsZero() {
		st += " at " + formatTime(dl.Redriven)
	}
	field("State", st)
	if dl.Redrives > 0 {
		field("Redrives", fmt.Sprintf("%d (replay of %s)", dl.Redrives, dl.RedriveOf))
	}
	field("Idempotency key", orDash(dl.IdempotencyKey))
	field("Last error", orDash(dl.LastError))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(dl.Errors) > 0 {
		fmt.Fprintln(w, "Errors:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ATTEMPT\tWAIT BEFORE\tERROR")
		for _, e := range dl.Errors {
			fmt.Fprintf(tw, "  %d\t%s\t%s\n", e.Attempt, e.Wait, oneLine(e.Error, 200))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return printPayload(w, dl.Payload)
}

// printPayload prints p as text when it is printable UTF-8, else as a
// hex dump.
func printPayload(w io.Writer, p []byte) error {
	if len(p) == 0 {
		_, err := fmt.Fprintln(w, "Payload: none")
		return err
	}
	if printable(p) {
		_, err := fmt.Fprintf(w, "Payload (%d bytes):\n  %s\n", len(p), strings.ReplaceAll(strings.TrimRight(string(p), "\n"), "\n", "\n  "))
		return err
	}
	_, err := fmt.Fprintf(w, "Payload (%d bytes, binary):\n%s", len(p), hex.Dump(p))
	return err
}

func printable(p []byte) bool {
	if !utf8.Valid(p) {
		return false
	}
	for _, r := range string(p) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

func state(dl retry.DeadLetter) string {
	if dl.Redriven.IsZero() {
		return "pending"
	}
	return "redriven"
}

// formatTime prints t in UTC to the second, or "-" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// oneLine makes s fit one table cell: control characters become spaces
// and it is cut to at most width runes, ending with "…" when cut.
func oneLine(s string, width int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width-1]) + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
