package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goTestJSON runs go test -json on a small module of its own with
// passing, skipping and failing tests, and a package that does not build.
func goTestJSON(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.25\n",
		"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) { t.Log("not shown") }

func TestSkip(t *testing.T) { t.Skip("no server at 127.0.0.1:1: start one") }

func TestFail(t *testing.T) { t.Error("boom") }

func TestSub(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("skipped", func(t *testing.T) { t.Skipf("the race detector allocates") })
}
`,
		"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) {}\n",
		"c/c_test.go": "package c\n\nfunc TestC(t *testing.T) {}\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	require.Error(t, err, "go test fails: TestFail fails and package c does not build")
	return out
}

func TestRecordAndReport(t *testing.T) {
	var shown bytes.Buffer
	sum, err := record(bytes.NewReader(goTestJSON(t)), &shown)
	require.NoError(t, err)

	// What go test prints without -json: the packages' closing lines and
	// the output of the failed test, not the passing or skipped tests'.
	out := shown.String()
	assert.Contains(t, out, "a_test.go:9: boom")
	assert.Contains(t, out, "--- FAIL: TestFail")
	assert.Regexp(t, `(?m)^FAIL\texample.com/m/a\t`, out)
	assert.Regexp(t, `(?m)^ok  \texample.com/m/b\t`, out)
	assert.Contains(t, out, "undefined: testing")
	assert.NotContains(t, out, "not shown")
	assert.NotContains(t, out, "=== RUN")
	assert.NotRegexp(t, `(?m)^PASS$`, out)

	// TestPass, TestSub, TestSub/ok and TestB pass; the package that
	// does not build counts as one failure.
	assert.Equal(t, 4, sum.Passed)
	assert.Equal(t, 2, sum.Failed)
	assert.Equal(t, 2, sum.Skipped)
	assert.Equal(t, []result{
		{Package: "example.com/m/a", Test: "TestSkip", Reason: "a_test.go:7: no server at 127.0.0.1:1: start one"},
		{Package: "example.com/m/a", Test: "TestSub/skipped", Reason: "a_test.go:13: the race detector allocates"},
	}, sum.Skips)
	assert.Equal(t, []result{{Package: "example.com/m/a", Test: "TestFail"}, {Package: "example.com/m/c"}}, sum.Fails)

	file := filepath.Join(t.TempDir(), "runs.jsonl")
	sum.Module, sum.Run = "example.com/m", "-race"
	require.NoError(t, appendJSON(file, sum))
	sum.Run = "no -race"
	require.NoError(t, appendJSON(file, sum))
	runs, err := readRuns(file)
	require.NoError(t, err)
	require.Len(t, runs, 2)

	var rep bytes.Buffer
	assert.False(t, report(runs, nil, &rep))
	lines := strings.Split(strings.TrimSpace(rep.String()), "\n")
	assert.Equal(t, "8 passed, 4 failed, 4 skipped", lines[len(lines)-1], "the closing line comes last")
	assert.Contains(t, rep.String(), "      4       2        2  example.com/m (-race)\n")
	assert.Contains(t, rep.String(), "      4       2        2  example.com/m (no -race)\n")
	assert.Contains(t, rep.String(), "example.com/m/a TestSkip (-race, no -race): a_test.go:7: no server at 127.0.0.1:1: start one\n")
	assert.Contains(t, rep.String(), "FAILED: package example.com/m/c (-race) failed")
}

func TestSkippedSelectsTheTestsThatSkippedInARun(t *testing.T) {
	sum, err := record(bytes.NewReader(goTestJSON(t)), &bytes.Buffer{})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "runs.jsonl")
	sum.Module, sum.Run = "example.com/m", "-race"
	require.NoError(t, appendJSON(file, sum))
	require.NoError(t, appendJSON(file, runSummary{Module: "example.com/other", Run: "-race", Skips: []result{{Package: "example.com/other", Test: "TestOther"}}}))

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"skipped", "-module", "example.com/m", "-run", "-race", file}, nil, &out, &errOut), errOut.String())
	assert.Equal(t, "^(TestSkip|TestSub)$\nexample.com/m/a\n", out.String(), "a skipped subtest selects its parent")

	out.Reset()
	require.Equal(t, 0, run([]string{"skipped", "-module", "example.com/m", "-run", "-race", "-reason", "race detector", file}, nil, &out, &errOut), errOut.String())
	assert.Equal(t, "^(TestSub)$\nexample.com/m/a\n", out.String(), "only the skips for the race detector")

	out.Reset()
	require.Equal(t, 0, run([]string{"skipped", "-module", "example.com/m", "-run", "no -race", file}, nil, &out, &errOut))
	assert.Empty(t, out.String(), "nothing for a run with no skips")
}

func TestReportAllowSkips(t *testing.T) {
	runs := []runSummary{{
		Module: "m", Passed: 3, Skipped: 2,
		Skips: []result{
			{Package: "m/a", Test: "TestAllocs", Reason: "x_test.go:1: the race detector allocates"},
			{Package: "m/a", Test: "TestCluster", Reason: "x_test.go:2: no Redis Cluster at 127.0.0.1:7001"},
		},
	}}
	var rep bytes.Buffer
	assert.True(t, report(runs, nil, &rep), "without -allow-skips a skip is only shown")
	assert.True(t, strings.HasSuffix(rep.String(), "\n3 passed, 0 failed, 2 skipped\n"), rep.String())

	rep.Reset()
	assert.False(t, report(runs, regexp.MustCompile("race detector"), &rep))
	assert.Contains(t, rep.String(), "only skips matching \"race detector\" may skip here")
	assert.Contains(t, rep.String(), "\nm/a TestCluster\n")
	assert.NotContains(t, rep.String(), "\nm/a TestAllocs\n")

	rep.Reset()
	assert.True(t, report(runs, regexp.MustCompile("race detector|^TestCluster: "), &rep), "the test's name can be allowed too")
}

func TestNoteFailsTheReport(t *testing.T) {
	file := filepath.Join(t.TempDir(), "runs.jsonl")
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"note", "-to", file, "go", "vet", "failed", "in", "./x"}, nil, &stdout, &stderr), stderr.String())
	require.Equal(t, 1, run([]string{"report", file}, nil, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "FAILED: go vet failed in ./x\n0 passed, 0 failed, 0 skipped\n")
}

func TestNonJSONLinesPassThrough(t *testing.T) {
	var shown bytes.Buffer
	sum, err := record(strings.NewReader("go: some error\n{\"Action\":\"output\",\"Package\":\"p\",\"Output\":\"ok  \\tp\\t0.1s\\n\"}\n"), &shown)
	require.NoError(t, err)
	assert.Equal(t, "go: some error\nok  \tp\t0.1s\n", shown.String())
	assert.Equal(t, runSummary{}, sum)
}

func TestRecordPrintsTheTestsThatNeverEnded(t *testing.T) {
	events := strings.Join([]string{
		`{"Action":"run","Package":"example.com/m/h","Test":"TestHang"}`,
		`{"Action":"output","Package":"example.com/m/h","Test":"TestHang","Output":"=== RUN   TestHang\n"}`,
		`{"Action":"output","Package":"example.com/m/h","Test":"TestHang","Output":"panic: test timed out after 1s\n"}`,
		`{"Action":"output","Package":"example.com/m/h","Test":"TestHang","Output":"goroutine 7 [chan receive]:\n"}`,
		`{"Action":"fail","Package":"example.com/m/h","Elapsed":1}`,
	}, "\n")
	var shown bytes.Buffer
	sum, err := record(strings.NewReader(events), &shown)
	require.NoError(t, err)
	assert.Equal(t, "--- UNFINISHED: TestHang\npanic: test timed out after 1s\ngoroutine 7 [chan receive]:\n", shown.String())
	assert.Equal(t, []result{{Package: "example.com/m/h"}}, sum.Fails)
}
