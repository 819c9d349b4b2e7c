package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cli runs the command line and returns its exit status and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRun_badFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-runs", "0"}, "-runs 0: want a number of runs in [1, 10000]"},
		{[]string{"-clients", "-3"}, "-clients -3: want a number of clients in [1, 10000]"},
		{[]string{"-clients", "many"}, `invalid value "many" for flag -clients`},
		{[]string{"-seed", "-1"}, `invalid value "-1" for flag -seed`},
		{[]string{"-seed", "abc"}, `invalid value "abc" for flag -seed`},
		{[]string{"-scenario", "j"}, `-scenario "j": want a, b, c, d, e, f, g, h, i or all`},
		{[]string{"-scenario", "ab"}, `-scenario "ab": want a, b, c, d, e, f, g, h, i or all`},
		{[]string{"-out", ""}, "-out: want a directory"},
		{[]string{"-frobnicate"}, "flag provided but not defined: -frobnicate"},
		{[]string{"b"}, `unexpected argument "b": retrysim takes flags only`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out := t.TempDir()
			code, stdout, stderr := cli(t, append([]string{"-out", out}, tc.args...)...)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr, tc.want)
			assert.Equal(t, 1, strings.Count(stderr, tc.want), "the error once: %s", stderr)
			assert.Equal(t, "retrysim: ", stderr[:min(len(stderr), 10)], "the error first")
			assert.NotContains(t, stderr, "usage:", "the error, not the usage")
			assert.True(t, strings.HasSuffix(stderr, "\nRun 'retrysim -h' for the flags.\n"), stderr)
			assert.Empty(t, stdout)
			entries, err := os.ReadDir(out)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing written")
		})
	}
}

func TestRun_help(t *testing.T) {
	code, stdout, stderr := cli(t, "-h")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, stdout)
	assert.True(t, strings.HasPrefix(stderr, "usage: retrysim"), stderr)
	assert.Contains(t, stderr, "-scenario")
	assert.Contains(t, stderr, "[-scenario a|b|c|d|e|f|g|h|i|all]")
	assert.Contains(t, stderr, "a, b, c, d, e, f, g, h, i or all")
}

// TestParse_scenarioGHI: -scenario takes g, h and i, and all runs them
// too.
func TestParse_scenarioGHI(t *testing.T) {
	for _, s := range []string{"g", "h", "i"} {
		cfg, err := parse([]string{"-scenario", s}, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, s, cfg.scenarios)
		assert.True(t, cfg.has(s[0]))
		assert.False(t, cfg.has('b'))
		assert.Contains(t, cfg.commandLine(), "-scenario "+s+" ")
	}
	all, err := parse(nil, io.Discard)
	require.NoError(t, err)
	assert.True(t, all.has('g'))
	assert.True(t, all.has('h'))
	assert.True(t, all.has('i'))
	assert.Contains(t, all.commandLine(), "-scenario all ")
}

func TestRun_writesChartsAndTables(t *testing.T) {
	out := filepath.Join(t.TempDir(), "charts")
	code, stdout, stderr := cli(t, "-scenario", "d", "-out", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "d  [met]     one-layer rule (default): 3 leaf calls per user call: 3.00")
	png, err := os.ReadFile(filepath.Join(out, "d-nested.png"))
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")))
	svg, err := os.ReadFile(filepath.Join(out, "d-nested.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(svg), "<svg")
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "\nWritten by `retrysim -seed 1 -scenario d -out "+shellArg(out)+"`; do not edit.\n", "the command that was run; no link without -doc")
	assert.Contains(t, string(md), "| NestedRetries at every layer | 27.00 |")
	assert.Contains(t, string(md), "| d | one-layer rule (default): 3 leaf calls per user call | 3.00 | met |")
}

func TestRun_rewritesTheDocsBlocks(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "overload.md")
	before := "# Overload\n\nText.\n\n<!-- retrysim:d -->\nold table\n<!-- /retrysim:d -->\n\nMore.\n\n<!-- retrysim:checks -->\n<!-- /retrysim:checks -->\n"
	require.NoError(t, os.WriteFile(doc, []byte(before), 0o644))
	code, _, stderr := cli(t, "-scenario", "d", "-out", filepath.Join(dir, "out"), "-doc", doc)
	require.Equal(t, exitOK, code, stderr)
	got, err := os.ReadFile(doc)
	require.NoError(t, err)
	text := string(got)
	assert.True(t, strings.HasPrefix(text, "# Overload\n\nText.\n\n<!-- retrysim:d -->\nA user call reached the leaf 3 times with the one-layer rule and 27 times without it.\n\n3 layers of 3 attempts"), text)
	assert.NotContains(t, text, "old table")
	assert.Contains(t, text, "| one-layer rule (default) | 3.00 |\n| NestedRetries at every layer | 27.00 |\n<!-- /retrysim:d -->\n\nMore.")
	assert.Contains(t, text, "| d | NestedRetries at every layer: 27 leaf calls per user call | 27.00 | met |\n<!-- /retrysim:checks -->\n")
	md, err := os.ReadFile(filepath.Join(dir, "out", "results.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "\nWritten by `retrysim -seed 1 -scenario d -out "+shellArg(filepath.Join(dir, "out"))+" -doc "+shellArg(doc)+"`; do not edit. See [../overload.md](../overload.md) for what the scenarios show.\n")

	// A second run changes nothing.
	code, _, stderr = cli(t, "-scenario", "d", "-out", filepath.Join(dir, "out"), "-doc", doc)
	require.Equal(t, exitOK, code, stderr)
	again, err := os.ReadFile(doc)
	require.NoError(t, err)
	assert.Equal(t, text, string(again))
}

func TestRun_docWithoutABlock(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "overload.md")
	require.NoError(t, os.WriteFile(doc, []byte("<!-- retrysim:checks -->\n<!-- /retrysim:checks -->\n"), 0o644))
	code, _, stderr := cli(t, "-scenario", "d", "-out", dir, "-doc", doc)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, `no block "<!-- retrysim:d -->" ... "<!-- /retrysim:d -->" for scenario d`)
	got, err := os.ReadFile(doc)
	require.NoError(t, err)
	assert.Equal(t, "<!-- retrysim:checks -->\n<!-- /retrysim:checks -->\n", string(got), "left as it was")
}

func TestSummary_countsBoundsNotMet(t *testing.T) {
	res := &results{cfg: defaultConfig(1), a: &contentionResult{
		params: contentionParams{clients: 100, runs: 1},
		runs:   [][]contentionRun{{{calls: 1000}}, {{calls: 600}}, {{calls: 600}}, {{calls: 700}}},
	}}
	var out bytes.Buffer
	assert.Equal(t, 1, summary(&out, res, nil, 0))
	assert.Contains(t, out.String(), "a  [NOT met] full jitter makes ≤ 0.5x the calls of no jitter: 0.60x (600.0 / 1000.0)")

	res.a.params.clients = 10
	out.Reset()
	assert.Zero(t, summary(&out, res, nil, 0))
	assert.Contains(t, out.String(), "[n/a]")
}

// TestRun_writtenByTheCommandThatRan: results.md names the flags of the
// run, -runs and -clients only when scenario a ran.
func TestRun_writtenByTheCommandThatRan(t *testing.T) {
	out := filepath.Join(t.TempDir(), "my charts")
	code, stdout, stderr := cli(t, "-scenario", "a", "-runs", "2", "-clients", "10", "-seed", "3", "-out", out)
	require.Equal(t, exitOK, code, stderr)
	want := "retrysim -seed 3 -runs 2 -clients 10 -scenario a -out '" + out + "'"
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "\nWritten by `"+want+"`; do not edit.\n")
	assert.True(t, strings.HasPrefix(stdout, want+": "), stdout)

	code, stdout, stderr = cli(t, "-scenario", "d", "-runs", "2", "-clients", "10", "-out", out)
	require.Equal(t, exitOK, code, stderr)
	md, err = os.ReadFile(filepath.Join(out, "results.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "\nWritten by `retrysim -seed 1 -scenario d -out '"+out+"'`; do not edit.\n", "scenario d uses neither -runs nor -clients")
	assert.NotContains(t, stdout, "-runs")
}

// TestDocLink: the link from results.md in -out to -doc is the path
// from one to the other, or none.
func TestDocLink(t *testing.T) {
	for _, tc := range []struct{ out, doc, want string }{
		{filepath.Join("docs", "overload"), filepath.Join("docs", "overload.md"), "[../overload.md](../overload.md)"},
		{"out", filepath.Join("docs", "overload.md"), "[../docs/overload.md](../docs/overload.md)"},
		{filepath.Join("a", "b", "c"), "overload.md", "[../../../overload.md](../../../overload.md)"},
		{"docs", filepath.Join("docs", "overload.md"), "[overload.md](overload.md)"},
		{"/tmp/x/charts", "/tmp/x/overload.md", "[../overload.md](../overload.md)"},
		{"out", "my doc (draft).md", "[../my doc (draft).md](<../my doc (draft).md>)"},
		{"out", "odd[1].md", ""},
		{filepath.Join("docs", "overload"), "", ""},
	} {
		assert.Equal(t, tc.want, docLink(tc.out, tc.doc), "%q, %q", tc.out, tc.doc)
	}
	abs, err := filepath.Abs(filepath.Join("docs", "overload.md"))
	require.NoError(t, err)
	assert.Equal(t, "[../overload.md](../overload.md)", docLink(filepath.Join("docs", "overload"), abs), "a relative -out, an absolute -doc")
}
