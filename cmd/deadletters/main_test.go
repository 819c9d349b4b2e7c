package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		// A child of TestListHoldsOneRecord: be the command.
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// envRunMain makes the test binary run as the command, for tests that
// measure it as a process.
const envRunMain = "DEADLETTERS_TEST_RUN_MAIN"

// cli runs the command line and returns its exit status and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// t0 is when the oldest test record gave up.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// records returns four records an hour apart, t0 first.
func records() []retry.DeadLetter {
	rec := func(id, name string, reason retry.Outcome, h int, payload string) retry.DeadLetter {
		return retry.DeadLetter{
			ID: id, Name: name, IdempotencyKey: "key-" + id, Payload: []byte(payload),
			Attempts: 3, FirstAttempt: t0.Add(time.Duration(h)*time.Hour - time.Second),
			GaveUp: t0.Add(time.Duration(h) * time.Hour), Reason: reason,
			LastError: "connection refused",
			Errors: []retry.AttemptError{
				{Attempt: 1, Error: "timeout"},
				{Attempt: 3, Wait: 200 * time.Millisecond, Error: "connection refused"},
			},
		}
	}
	recs := []retry.DeadLetter{
		rec("aaaa0001", "charge", retry.OutcomeExhausted, 0, `{"order":1}`),
		rec("aaaa0002", "email", retry.OutcomePermanent, 1, "line one\nline two"),
		rec("aaaa0003", "charge", retry.OutcomeExhausted, 2, "\x00\x01binary\xff"),
		rec("aaaa0004", "ship", retry.OutcomeDeadline, 3, ""),
	}
	recs[3].Payload = nil // none, as Do leaves it without WithPayload
	return recs
}

// writeFile writes records() to a new dead-letter file through a
// FileSink, marks aaaa0004 as redriven, and returns the file's path.
func writeFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	sink, err := deadletter.OpenFile(path, nil)
	require.NoError(t, err)
	for _, dl := range records() {
		require.NoError(t, sink.Put(t.Context(), dl))
	}
	ok, err := sink.MarkRedriven(t.Context(), "aaaa0004")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, sink.Close())
	return path
}

// column returns the first column of a table's rows, without the header.
func column(table string) []string {
	out := []string{}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	for _, l := range lines[1:] {
		out = append(out, strings.Fields(l)[0])
	}
	return out
}

func TestUsageErrors(t *testing.T) {
	path := writeFile(t)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"list"},
		{"list", "-file", path, "-postgres", "postgres://x"},
		{"list", "-file", path, "-table", "t"},
		{"list", "-file", path, "-since", "yesterday"},
		{"list", "-file", path, "-since", "-3d"},
		{"list", "-file", path, "-reason", "exhausted,success"},
		{"list", "-file", path, "-state", "done"},
		{"list", "-file", path, "-limit", "0"},
		{"list", "-file", path, "-name", ""},
		{"list", "-file", path, "-since", "2026-11-02", "-until", "2026-11-01"},
		{"list", "-file", path, "stray"},
		{"list", "-file", path, "-bogus"},
		{"show", "-file", path},
		{"purge", "-file", path},
		{"purge", "-file", path, "-all", "-name", "charge"},
		{"redrive", "-file", path},
		{"redrive", "-file", path, "-exec", "true", "-state", "redriven"},
		{"redrive", "-file", path, "-exec", "true", "-attempts", "0"},
		{"redrive", "-file", path, "-exec", "true", "-backoff", "-1s"},
		{"list", "-postgres", "postgres://x", "-table", "a;b"},
		{"list", "-postgres", "postgres://x", "-table", ""},
		{"purge", "-postgres", "postgres://x", "-table", "", "-all"},
		{"list", "-postgres", "::not a url::"},
	} {
		code, stdout, stderr := cli(t, args...)
		assert.Equal(t, exitUsage, code, "%q", args)
		assert.Empty(t, stdout, "%q", args)
		assert.Contains(t, stderr, "usage:", "%q", args)
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, got, "no usage error changed the file")
}

func TestUsageNamesTheProblem(t *testing.T) {
	_, _, stderr := cli(t, "purge", "-file", writeFile(t))
	assert.Contains(t, stderr, "deadletters purge: purge needs IDs or a filter")
	_, _, stderr = cli(t, "list", "-file", "x", "-reason", "sucess")
	assert.Contains(t, stderr, `unknown reason "sucess"`)
	_, _, stderr = cli(t, "bogus")
	assert.Contains(t, stderr, `unknown command "bogus"`)
	_, _, stderr = cli(t, "list", "-postgres", "postgres://x", "-table", "")
	assert.Contains(t, stderr, "-table: the table name is empty (leave -table out for retry_dead_letters)")
	_, _, stderr = cli(t, "list", "-postgres", "postgres://x", "-table", "a;b")
	assert.Contains(t, stderr, `-table: retry: invalid option: pgdeadletter: Options.Table "a;b"`)
}

// TestReasonsAreEveryFailureOutcome: the error of a bad -reason, -h and
// the manual name every reason a record can have, refused and unknown
// included, and -reason takes each of them.
func TestReasonsAreEveryFailureOutcome(t *testing.T) {
	const all = "permanent, exhausted, max-elapsed, deadline, canceled, refused or unknown"
	_, _, stderr := cli(t, "list", "-file", "x", "-reason", "sucess")
	assert.Contains(t, stderr, `unknown reason "sucess": use `+all+"\n")
	_, stdout, _ := cli(t, "list", "-h")
	assert.Contains(t, stdout, "comma-separated: permanent, exhausted, max-elapsed, deadline, canceled, refused, unknown\n")
	assert.Contains(t, help, "comma-separated: permanent, exhausted, max-elapsed, deadline, canceled, refused, unknown\n")

	path := filepath.Join(t.TempDir(), "dead.jsonl")
	sink, err := deadletter.OpenFile(path, nil)
	require.NoError(t, err)
	var names []string
	for o := retry.OutcomePermanent; o <= retry.OutcomeUnknown; o++ {
		dl := records()[0]
		dl.ID, dl.Reason = fmt.Sprintf("bbbb%04d", o), o
		require.NoError(t, sink.Put(t.Context(), dl))
		names = append(names, o.String())
	}
	require.NoError(t, sink.Close())
	assert.Equal(t, strings.ReplaceAll(strings.Replace(all, " or ", ", ", 1), " ", ""), strings.Join(names, ","), "the test knows every failure outcome")
	for o := retry.OutcomePermanent; o <= retry.OutcomeUnknown; o++ {
		code, stdout, stderr := cli(t, "list", "-file", path, "-reason", o.String())
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, []string{fmt.Sprintf("bbbb%04d", o)}, column(stdout), o.String())
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := cli(t, "help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "DEADLETTER_IDEMPOTENCY_KEY")
}

// TestCommandHelp: every command's -h prints its usage, with its own
// flags, to stdout and exits 0, before it looks at the store.
func TestCommandHelp(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"list":    {"-file PATH", "-postgres URL", "-json", "-reason LIST", "-since T", "-state S"},
		"show":    {"-file PATH", "-json"},
		"redrive": {"-exec COMMAND", "-attempts", "-backoff", "-timeout", "-dry-run", "-since T"},
		"purge":   {"-all", "-dry-run", "-limit N"},
	} {
		for _, h := range []string{"-h", "-help", "--help"} {
			for _, args := range [][]string{{cmd, h}, {cmd, "-file", "/nonexistent/dead.jsonl", h}} {
				code, stdout, stderr := cli(t, args...)
				assert.Equal(t, exitOK, code, "%q", args)
				assert.Empty(t, stderr, "%q", args)
				assert.True(t, strings.HasPrefix(stdout, "usage: deadletters "+cmd+" STORE"), "%q: %s", args, stdout)
				for _, f := range flags {
					assert.Contains(t, stdout, "  "+f, "%q", args)
				}
				assert.NotContains(t, stdout, "help requested", "%q", args)
			}
		}
	}
	_, stdout, _ := cli(t, "show", "-h")
	assert.NotContains(t, stdout, "-since", "show takes no filters")
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-11-29T07:00:00Z":        time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC),
		"2026-11-29T09:00:00+02:00":   time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC),
		"2026-11-29T07:00:00.123456Z": time.Date(2026, 11, 29, 7, 0, 0, 123456000, time.UTC), // as examples/notify prints it
		"2026-11-28":                  time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC),
		"90m":                         now.Add(-90 * time.Minute),
		"24h":                         now.Add(-24 * time.Hour),
		"7d":                          now.Add(-7 * 24 * time.Hour),
		"0s":                          now,
	} {
		got, err := parseTime(in, now)
		if assert.NoError(t, err, in) {
			assert.True(t, want.Equal(got), "%s: want %v, got %v", in, want, got)
		}
	}
	for _, in := range []string{"", "yesterday", "-1h", "d", "1.5d", "-2d", "999999999d", "2026-13-01"} {
		_, err := parseTime(in, now)
		assert.Error(t, err, in)
	}
}

func TestOneLine(t *testing.T) {
	assert.Equal(t, "a b", oneLine("a\nb", 10))
	assert.Equal(t, "abcd…", oneLine("abcdefgh", 5))
	assert.Equal(t, "ééé", oneLine("ééé", 3), "counts runes, not bytes")
}

func TestJSONRoundTrip(t *testing.T) {
	path := writeFile(t)
	code, stdout, _ := cli(t, "list", "-file", path, "-json")
	require.Equal(t, exitOK, code)
	var got []retry.DeadLetter
	dec := json.NewDecoder(strings.NewReader(stdout))
	for dec.More() {
		var dl retry.DeadLetter
		require.NoError(t, dec.Decode(&dl))
		got = append(got, dl)
	}
	want := records()
	require.Len(t, got, len(want))
	for i := range want {
		if i == 3 {
			assert.False(t, got[i].Redriven.IsZero(), "the mark is folded in")
			got[i].Redriven = time.Time{}
		}
		assert.Equal(t, want[i], got[i])
	}
}

func TestContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"redrive", "-file", writeFile(t), "-exec", "true"}, &out, &errOut)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errOut.String(), "context canceled")
}

// Records hold untrusted text: no control character reaches the terminal.
func TestPrintingStripsControlCharacters(t *testing.T) {
	dl := records()[0]
	dl.Name = "op\x1b[31m"
	dl.LastError = "boom\x1b]0;pwned\x07\nsecond line"
	var out bytes.Buffer
	require.NoError(t, printTable(&out, []retry.DeadLetter{dl}))
	require.NoError(t, printRecord(&out, dl))
	assert.NotContains(t, out.String(), "\x1b")
	assert.NotContains(t, out.String(), "\x07")
	assert.Contains(t, out.String(), "Last error:       boom ]0;pwned  second line")
}

// printTable prints recs as a table, as list does.
func printTable(w io.Writer, recs []retry.DeadLetter) error {
	t := newTable(w)
	for _, dl := range recs {
		if err := t.row(dl); err != nil {
			return err
		}
	}
	return t.flush()
}
