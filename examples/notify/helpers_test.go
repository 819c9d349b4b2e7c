package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// childEnv, when set, makes the test binary run the command with the
// JSON-encoded arguments it holds instead of the tests (see TestMain), so
// that a test can watch the command exit for real.
const childEnv = "NOTIFY_TEST_CHILD_ARGS"

func childArgs() []string {
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &args); err != nil {
		os.Stderr.WriteString("bad " + childEnv + ": " + err.Error() + "\n")
		os.Exit(2)
	}
	return args
}

// runChild runs the command in a child process with args and returns its
// exit status and output.
func runChild(t *testing.T, args ...string) (int, string) {
	t.Helper()
	enc, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+string(enc))
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "the child did not run: %s", out)
		return exit.ExitCode(), string(out)
	}
	return 0, string(out)
}

// testArgs are flags for a small, quick run whose files go to dir.
func testArgs(dir string, more ...string) []string {
	return append([]string{
		"-jobs", "400", "-workers", "4",
		"-dead-letters", filepath.Join(dir, "deadletters.jsonl"),
		"-log", filepath.Join(dir, "notify.log"),
	}, more...)
}

func testConfig(t *testing.T, more ...string) config {
	t.Helper()
	cfg, err := parseFlags(testArgs(t.TempDir(), more...), io.Discard)
	require.NoError(t, err)
	return cfg
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runIn runs the command in this process, and returns its summary and
// what it printed.
func runIn(t *testing.T, cfg config, e env) (summary, string) {
	t.Helper()
	var out syncBuffer
	e.stdout = &out
	if e.log == nil {
		e.log = io.Discard
	}
	s, err := run(context.WithoutCancel(t.Context()), cfg, e)
	require.NoError(t, err, "output:\n%s", out.String())
	require.Empty(t, s.unhandled)
	return s, out.String()
}

// parallelRuns runs the command n times at once with args (after
// testArgs'), and returns their summaries.
func parallelRuns(t *testing.T, n int, args ...string) []summary {
	t.Helper()
	runs := make([]summary, n)
	t.Run("runs", func(t *testing.T) {
		for i := range runs {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				runs[i], _ = runIn(t, testConfig(t, args...), env{})
			})
		}
	})
	return runs
}
