package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadfast-go/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryCommandWarnsOfTornLines: every command that reads a file says
// which lines it skipped, on stderr (issue #20: redrive and a real purge
// skipped them without a word).
func TestEveryCommandWarnsOfTornLines(t *testing.T) {
	for name, args := range map[string][]string{
		"list":            {"list"},
		"list -json":      {"list", "-json"},
		"show":            {"show", "aaaa0001", "aaaa0002"},
		"redrive":         {"redrive", "-exec", "true", "-name", "charge"},
		"redrive dry run": {"redrive", "-exec", "true", "-dry-run"},
		"purge":           {"purge", "-name", "ship"},
		"purge dry run":   {"purge", "-all", "-dry-run"},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t)
			appendRaw(t, path, "garbage\n")
			code, _, stderr := cli(t, append(args[:1:1], append([]string{"-file", path}, args[1:]...)...)...)
			assert.Equal(t, exitOK, code, stderr)
			assert.Contains(t, stderr, "deadletters: warning: deadletter: file "+path+": 1 torn record skipped, at byte offset ")
			assert.Contains(t, stderr, " (line 6)\n")
			assert.Equal(t, 1, strings.Count(stderr, "torn record"), "warned once: %s", stderr)
		})
	}
}

// The case of the issue, through the command as a user runs it.
func TestRedriveWarnsOfAFileOfGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("garbage\n"), 0o600))
	code, stdout, stderr := cli(t, "redrive", "-file", path, "-exec", "true")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "redrive: 0 pending")
	assert.Contains(t, stderr, "1 torn record skipped, at byte offset 0 (line 1)")
}

// Records hold untrusted text: no Unicode bidi control, which reorders
// what a terminal shows (U+202E shows "exe.txt" as "txt.exe"), reaches
// it, in a table, a record, a replay's output or an error.
func TestPrintingStripsBidiControls(t *testing.T) {
	bidi := []rune{0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x200E, 0x200F, 0x061C}
	dl := records()[0]
	dl.Name = "op" + string(bidi[:6])
	dl.LastError = "boom\u202Etxt.exe" + string(bidi[6:])
	dl.Errors[0].Error = "\u202Eattempt"
	var out bytes.Buffer
	require.NoError(t, printTable(&out, []retry.DeadLetter{dl}))
	require.NoError(t, printRecord(&out, dl))
	warn(&out, &usageErr{msg: "record \u202Eid\nnext line"})
	for _, r := range bidi {
		assert.NotContains(t, out.String(), string(r), "%U", r)
	}
	assert.Contains(t, out.String(), "Last error:       boom txt.exe")
	assert.Contains(t, out.String(), "record  id\nnext line", "a warning keeps its lines")

	path := writeFile(t)
	sinkRecord(t, path, "\u202Eevil")
	code, stdout, stderr := cli(t, "redrive", "-file", path, "-exec", "true", "-name", "evil")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "1 succeeded")
	assert.Contains(t, stderr, "deadletters:  evil attempt 1: ok")
	assert.NotContains(t, stderr, "\u202E")
}

// sinkRecord appends a record named and identified by id to the file.
func sinkRecord(t *testing.T, path, id string) {
	t.Helper()
	dl := records()[0]
	dl.ID, dl.Name = id, "evil"
	line, err := json.Marshal(dl)
	require.NoError(t, err)
	appendRaw(t, path, string(line)+"\n")
}
