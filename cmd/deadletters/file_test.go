package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListFile(t *testing.T) {
	path := writeFile(t)
	code, stdout, stderr := cli(t, "list", "-file", path)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 5)
	assert.Equal(t, []string{"ID", "NAME", "REASON", "ATTEMPTS", "GAVE", "UP", "STATE", "LAST", "ERROR"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"aaaa0001", "charge", "exhausted", "3", "2026-11-01", "12:00:00Z", "pending", "connection", "refused"}, strings.Fields(lines[1]))
	assert.Contains(t, lines[4], "redriven")

	cases := map[string]struct {
		args []string
		want []string
	}{
		"name":                  {[]string{"-name", "charge"}, []string{"aaaa0001", "aaaa0003"}},
		"reasons":               {[]string{"-reason", "permanent,deadline"}, []string{"aaaa0002", "aaaa0004"}},
		"since":                 {[]string{"-since", "2026-11-01T13:00:00Z"}, []string{"aaaa0002", "aaaa0003", "aaaa0004"}},
		"until":                 {[]string{"-until", "2026-11-01T13:00:00Z"}, []string{"aaaa0001"}},
		"pending":               {[]string{"-state", "pending", "-limit", "2"}, []string{"aaaa0001", "aaaa0002"}},
		"redriven":              {[]string{"-state", "redriven"}, []string{"aaaa0004"}},
		"flags after the store": {[]string{"-reason", "exhausted", "-since", "2026-11-01T12:30:00Z"}, []string{"aaaa0003"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := cli(t, append([]string{"list", "-file", path}, c.args...)...)
			require.Equal(t, exitOK, code, stderr)
			assert.Equal(t, c.want, column(stdout))
		})
	}

	code, stdout, stderr = cli(t, "list", "-file", path, "-name", "nobody")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "no dead letters match\n", stderr)
}

func TestListFileReportsTornLines(t *testing.T) {
	path := writeFile(t)
	appendRaw(t, path, `{"id":"torn`) // a crash mid-write
	code, stdout, stderr := cli(t, "list", "-file", path)
	assert.Equal(t, exitOK, code)
	assert.Len(t, column(stdout), 4)
	assert.Contains(t, stderr, "warning:")
	assert.Contains(t, stderr, "1 torn record skipped")
}

func appendRaw(t *testing.T, path, s string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestListMissingFile(t *testing.T) {
	code, stdout, stderr := cli(t, "list", "-file", filepath.Join(t.TempDir(), "none.jsonl"))
	assert.Equal(t, exitFail, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "no such file")
}

func TestShowFile(t *testing.T) {
	path := writeFile(t)
	code, stdout, stderr := cli(t, "show", "-file", path, "aaaa0002")
	require.Equal(t, exitOK, code, stderr)
	for _, want := range []string{
		"ID:               aaaa0002",
		"Name:             email",
		"Reason:           permanent",
		"First attempt:    2026-11-01 12:59:59Z",
		"State:            pending",
		"Idempotency key:  key-aaaa0002",
		"  3        200ms        connection refused",
		"Payload (17 bytes):\n  line one\n  line two\n",
	} {
		assert.Contains(t, stdout, want)
	}

	_, stdout, _ = cli(t, "show", "aaaa0003", "-file", path) // ID first
	assert.Contains(t, stdout, "Payload (9 bytes, binary):\n00000000  00 01 62 69")

	_, stdout, _ = cli(t, "show", "-file", path, "aaaa0004")
	assert.Contains(t, stdout, "State:            redriven at ")
	assert.Contains(t, stdout, "Payload: none")

	code, stdout, _ = cli(t, "show", "-file", path, "-json", "aaaa0001")
	require.Equal(t, exitOK, code)
	var dl retry.DeadLetter
	require.NoError(t, json.Unmarshal([]byte(stdout), &dl))
	assert.Equal(t, records()[0], dl)

	code, stdout, stderr = cli(t, "show", "-file", path, "aaaa0001", "nope")
	assert.Equal(t, exitFail, code, "a missing ID fails")
	assert.Contains(t, stdout, "ID:               aaaa0001", "the found ones are shown")
	assert.Contains(t, stderr, "no dead letter with this ID: nope")
}

func TestPurgeFile(t *testing.T) {
	path := writeFile(t)
	appendRaw(t, path, "{\"torn\n") // kept byte for byte
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	list := func() []string {
		_, stdout, _ := cli(t, "list", "-file", path)
		return column(stdout)
	}

	code, stdout, stderr := cli(t, "purge", "-file", path, "-reason", "exhausted", "-dry-run")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, []string{"aaaa0001", "aaaa0003"}, column(stdout))
	assert.Contains(t, stderr, "purge would delete 2")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a dry run changes nothing")

	code, stdout, _ = cli(t, "purge", "-file", path, "aaaa0002")
	require.Equal(t, exitOK, code)
	assert.Equal(t, "purged 1 dead letters\n", stdout)
	assert.Equal(t, []string{"aaaa0001", "aaaa0003", "aaaa0004"}, list())

	// Purging the redriven record drops its redrive marker too.
	code, _, _ = cli(t, "purge", "-file", path, "-state", "redriven")
	require.Equal(t, exitOK, code)
	after, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(after), "aaaa0004")
	assert.NotContains(t, string(after), "aaaa0002")
	assert.Contains(t, string(after), "{\"torn\n", "the torn line is kept")
	assert.True(t, bytes.HasPrefix(before, after[:bytes.IndexByte(after, '\n')+1]), "kept lines are unchanged")

	code, stdout, _ = cli(t, "purge", "-file", path, "-name", "nobody")
	require.Equal(t, exitOK, code)
	assert.Equal(t, "purged 0 dead letters\n", stdout)

	code, stdout, _ = cli(t, "purge", "-file", path, "-all")
	require.Equal(t, exitOK, code)
	assert.Equal(t, "purged 2 dead letters\n", stdout)
	assert.Empty(t, list())
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the file keeps its permissions")
	left, err := filepath.Glob(filepath.Join(filepath.Dir(path), "*.purge-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file is left behind")
}

func TestRedriveFile(t *testing.T) {
	path := writeFile(t)
	dir := t.TempDir()
	// The command saves what it got and fails for "email".
	script := `cat > "` + dir + `/$DEADLETTER_ID.payload"; ` +
		`printf '%s' "$DEADLETTER_JSON" > "` + dir + `/$DEADLETTER_ID.json"; ` +
		`echo "$DEADLETTER_IDEMPOTENCY_KEY $DEADLETTER_ATTEMPT" >> "` + dir + `/$DEADLETTER_ID.calls"; ` +
		`if [ "$DEADLETTER_NAME" = email ]; then echo "smtp: 550 mailbox unavailable" >&2; exit 1; fi`

	code, stdout, stderr := cli(t, "redrive", "-file", path, "-exec", script, "-attempts", "2", "-backoff", "0s")
	assert.Equal(t, exitFail, code, "a replay failed")
	assert.Equal(t, "redrive: 3 pending, 0 skipped (taken by another redrive), 2 succeeded, 1 failed again (stored as new dead letters), 0 failed and not stored\n", stdout)
	assert.Contains(t, stderr, "aaaa0001 attempt 1: ok")
	assert.Contains(t, stderr, "aaaa0002 attempt 2: exit status 1: smtp: 550 mailbox unavailable")
	assert.Contains(t, stderr, "1 replays failed")

	payload, err := os.ReadFile(filepath.Join(dir, "aaaa0001.payload"))
	require.NoError(t, err)
	assert.Equal(t, `{"order":1}`, string(payload), "the payload came on stdin")
	payload, err = os.ReadFile(filepath.Join(dir, "aaaa0003.payload"))
	require.NoError(t, err)
	assert.Equal(t, "\x00\x01binary\xff", string(payload), "binary payloads pass unchanged")
	js, err := os.ReadFile(filepath.Join(dir, "aaaa0001.json"))
	require.NoError(t, err)
	var meta retry.DeadLetter
	require.NoError(t, json.Unmarshal(js, &meta))
	assert.Equal(t, "charge", meta.Name)
	assert.Nil(t, meta.Payload, "the payload is not in the environment")
	calls, err := os.ReadFile(filepath.Join(dir, "aaaa0002.calls"))
	require.NoError(t, err)
	assert.Equal(t, "key-aaaa0002 1\nkey-aaaa0002 2\n", string(calls), "two attempts, with the idempotency key")
	_, err = os.Stat(filepath.Join(dir, "aaaa0004.payload"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a redriven record is not replayed")

	// The failed replay is a new pending record pointing back.
	code, stdout, _ = cli(t, "list", "-file", path, "-state", "pending", "-json")
	require.Equal(t, exitOK, code)
	var again retry.DeadLetter
	require.NoError(t, json.Unmarshal([]byte(stdout), &again), "exactly one pending record")
	assert.Equal(t, "aaaa0002", again.RedriveOf)
	assert.Equal(t, 1, again.Redrives)
	assert.Equal(t, "email", again.Name)
	assert.Equal(t, 2, again.Attempts)
	assert.Equal(t, "exit status 1: smtp: 550 mailbox unavailable", again.LastError, "the command's last words are kept")

	// A second redrive replays only that one.
	code, stdout, _ = cli(t, "redrive", "-file", path, "-exec", "true")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "redrive: 1 pending, 0 skipped (taken by another redrive), 1 succeeded")
	code, stdout, stderr = cli(t, "redrive", "-file", path, "-exec", "true")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "redrive: 0 pending")
	assert.Empty(t, stderr)
}

func TestRedriveFileFilterAndDryRun(t *testing.T) {
	path := writeFile(t)
	code, stdout, stderr := cli(t, "redrive", "-file", path, "-name", "charge", "-dry-run")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, []string{"aaaa0001", "aaaa0003"}, column(stdout))

	code, stdout, _ = cli(t, "redrive", "-file", path, "-name", "charge", "-limit", "1", "-exec", "true")
	require.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "redrive: 1 pending, 0 skipped (taken by another redrive), 1 succeeded")
	_, stdout, _ = cli(t, "list", "-file", path, "-state", "redriven")
	assert.Equal(t, []string{"aaaa0001", "aaaa0004"}, column(stdout), "only the oldest charge was replayed")
}

func TestRedriveTimeoutKillsCommand(t *testing.T) {
	path := writeFile(t)
	code, stdout, stderr := cli(t, "redrive", "-file", path, "-name", "ship", "-state", "all", "-exec", "true")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "0 pending", "-state all still means pending for redrive")

	code, stdout, stderr = cli(t, "redrive", "-file", path, "-name", "email", "-exec", "exec sleep 10", "-attempts", "1", "-timeout", "20ms")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stdout, "1 failed again")
	assert.Contains(t, stderr, "signal: killed")
}

func TestRedriveMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.jsonl")
	code, _, stderr := cli(t, "redrive", "-file", missing, "-exec", "true")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "no such file")
	_, err := os.Stat(missing)
	assert.ErrorIs(t, err, os.ErrNotExist, "redrive does not create the file")
}

// TestRedriveFileOldestFirst: redrive replays by give-up time, as list
// shows, not in the order the file was written, -limit included.
func TestRedriveFileOldestFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	sink, err := deadletter.OpenFile(path, nil)
	require.NoError(t, err)
	recs := records()
	for i := len(recs) - 1; i >= 0; i-- {
		require.NoError(t, sink.Put(t.Context(), recs[i]))
	}
	require.NoError(t, sink.Close())

	code, stdout, stderr := cli(t, "redrive", "-file", path, "-limit", "1", "-exec", "true")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "redrive: 1 pending, 0 skipped (taken by another redrive), 1 succeeded")
	assert.Contains(t, stderr, "aaaa0001 attempt 1: ok")
	code, _, stderr = cli(t, "redrive", "-file", path, "-exec", "true")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "deadletters: aaaa0002 attempt 1: ok\ndeadletters: aaaa0003 attempt 1: ok\ndeadletters: aaaa0004 attempt 1: ok\n", stderr)
}
