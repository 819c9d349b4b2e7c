package main

import (
	"encoding/hex"
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

// tableBlock is how many rows a table aligns at a time: a tabwriter
// holds its rows until flushed, and a table of a large file must not
// hold them all.
const tableBlock = 1000

// table prints one row per record, the header before the first, the
// columns aligned in blocks of tableBlock rows.
type table struct {
	tw   *tabwriter.Writer
	rows int
}

func newTable(w io.Writer) *table { return &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

func (t *table) row(dl retry.DeadLetter) error {
	if t.rows == 0 {
		fmt.Fprintln(t.tw, "ID\tNAME\tREASON\tATTEMPTS\tGAVE UP\tSTATE\tLAST ERROR")
	}
	fmt.Fprintf(t.tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", oneLine(dl.ID, math.MaxInt), orDash(oneLine(dl.Name, 40)), dl.Reason,
		dl.Attempts, formatTime(dl.GaveUp), state(dl), orDash(oneLine(dl.LastError, maxErrorWidth)))
	if t.rows++; t.rows%tableBlock == 0 {
		return t.flush()
	}
	return nil
}

func (t *table) flush() error { return t.tw.Flush() }

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

// oneLine makes s fit one table cell: control characters and bidi
// controls (see unsafeRune) become spaces and it is cut to at most width
// runes, ending with "…" when cut.
func oneLine(s string, width int) string {
	s = strings.Map(func(r rune) rune {
		if unsafeRune(r) {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width-1]) + "…"
}

// unsafeRune reports whether r must not reach a terminal from untrusted
// text: a control character (terminal escapes, newlines) or a Unicode
// bidi control, which reorders how the text around it is shown (U+061C,
// U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), so that a record could
// show as another.
func unsafeRune(r rune) bool {
	switch {
	case unicode.IsControl(r), r == '\u061c', r == '\u200e', r == '\u200f',
		r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// safeText is s with what unsafeRune reports made spaces, its newlines
// and tabs kept: for errors and warnings, which may quote a record.
func safeText(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && unsafeRune(r) {
			return ' '
		}
		return r
	}, s)
}

// warn prints err to w as a warning.
func warn(w io.Writer, err error) {
	fmt.Fprintf(w, "deadletters: warning: %s\n", safeText(err.Error()))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
