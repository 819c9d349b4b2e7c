package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListHoldsOneRecord: the commands stream the file, so a large file
// is read in little memory (issue #20: list used 356 MB for a 96 MB
// file, every record held, and their lines). The command runs as a child
// process, whose peak RSS the kernel reports.
func TestListHoldsOneRecord(t *testing.T) {
	skipUnlessRSS(t)
	path, n := bigFile(t, 100<<20, 2<<10)
	// One command, the issue's, to keep the test fast: the others read
	// the file through the same deadletter.ScanFile.
	peakRSS(t, n, "list", "-file", path)
}

// TestRedriveHoldsOneRecord: redrive, and its dry run, hold one record of
// the file at a time too, not every pending one (issue #20: the replay
// read them all first). Few large records keep the replays few.
func TestRedriveHoldsOneRecord(t *testing.T) {
	skipUnlessRSS(t)
	path, n := bigFile(t, 100<<20, 512<<10)
	_, stderr := peakRSS(t, n, "redrive", "-file", path, "-dry-run")
	assert.Contains(t, stderr, fmt.Sprintf("dry run: redrive would replay %d dead letters", n))
	stdout, _ := peakRSS(t, n, "redrive", "-file", path, "-exec", "cat >/dev/null", "-attempts", "1")
	assert.Contains(t, stdout, fmt.Sprintf("redrive: %d pending, 0 skipped (taken by another redrive), %d succeeded, 0 failed again", n, n))
	code, stdout, _ := cli(t, "redrive", "-file", path, "-dry-run")
	require.Equal(t, exitOK, code)
	assert.Empty(t, stdout, "every record was replayed and marked")
}

// skipUnlessRSS skips a test that measures a child's peak RSS where it
// cannot be measured well.
func skipUnlessRSS(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("the race detector multiplies the memory measured; run without -race")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the peak RSS in kilobytes, as Linux reports it")
	}
}

// peakRSS runs the command with args as a child process of n records'
// file, asserts that its peak RSS stays under 64 MiB, and returns its
// output. stdout is discarded for list, whose table is large.
func peakRSS(t *testing.T, n int, args ...string) (stdout, stderr string) {
	t.Helper()
	const limit = 64 << 20
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	var out, errOut strings.Builder
	cmd.Stderr = &errOut
	if args[0] != "list" {
		cmd.Stdout = &out
	} // else /dev/null
	start := time.Now()
	require.NoError(t, cmd.Run(), "%q: %s", args, errOut.String())
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	t.Logf("%q of %d records: peak RSS %.1f MiB, %v", args, n, float64(rss)/(1<<20), time.Since(start).Round(time.Millisecond))
	assert.Less(t, rss, int64(limit), "%q: peak RSS", args)
	return out.String(), errOut.String()
}

// bigFile writes a dead-letter file of about size bytes, records with a
// payload of payload bytes, and returns its path and its number of
// records.
func bigFile(t *testing.T, size, payload int) (string, int) {
	path := filepath.Join(t.TempDir(), "big.jsonl")
	dl := records()[0]
	dl.ID = strings.Repeat("0", 32)
	dl.Payload = []byte(strings.Repeat("p", payload))
	line, err := json.Marshal(dl)
	require.NoError(t, err)
	line = append(line, '\n')
	at := strings.Index(string(line), dl.ID)
	require.Positive(t, at)
	f, err := os.Create(path)
	require.NoError(t, err)
	w := bufio.NewWriterSize(f, 1<<20)
	n := 0
	for ; n*len(line) < size; n++ {
		copy(line[at:], fmt.Sprintf("%032x", n)) // a new ID, the same length
		_, err = w.Write(line)
		require.NoError(t, err)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
	return path, n
}
