package main

import (
	"archive/zip"
	"bytes"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	modzip "golang.org/x/mod/zip"
)

const root = "example.com/lib"

// goodFiles is a repository whose modules are ready for v0.1.0.
func goodFiles() map[string]string {
	return map[string]string{
		"LICENSE":             "license text\n",
		"go.mod":              "module example.com/lib\n\ngo 1.25\n",
		"lib.go":              "package lib\n",
		"internal/x/x.go":     "package x\n",
		"examples/demo/m.go":  "package main\n\nfunc main() {}\n",
		"gen.go":              "//go:build ignore\n\npackage main\n",
		"store/go.mod":        "module example.com/lib/store\n\ngo 1.25\n\nrequire example.com/lib v0.1.0\n",
		"store/store.go":      "package store\n",
		"store/testdata/t.go": "package broken\n",
		"cmd/tool/go.mod":     "module example.com/lib/cmd/tool\n\ngo 1.25\n\nrequire (\n\texample.com/lib v0.1.0\n\texample.com/lib/store v0.1.0\n)\n",
		"cmd/tool/main.go":    "package main\n\nimport (\n\t_ \"example.com/lib\"\n\t_ \"example.com/lib/store\"\n)\n\nfunc main() {}\n",
		"cmd/tool/LICENSE":    "the tool's own license\n",
		"bench/go.mod":        "module example.com/lib/bench\n\ngo 1.25\n\nrequire example.com/lib v0.1.0\n",
		"bench/b_test.go":     "package bench\n\nimport _ \"example.com/lib\"\n",
		"go.work": "go 1.25.0\n\nuse (\n\t.\n\t./bench\n\t./cmd/tool\n\t./store\n)\n\n" +
			"replace example.com/lib v0.1.0 => ./\n\nreplace example.com/lib/store v0.1.0 => ./store\n",
	}
}

// commit makes a git repository holding files in one commit.
func commit(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "test"},
	} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	return dir
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func lintRepo(t *testing.T, dir, want string) (string, []string) {
	t.Helper()
	tr, err := readTree(dir, "HEAD")
	require.NoError(t, err)
	mods, err := tr.modules([]string{"bench"})
	require.NoError(t, err)
	return lint(tr, mods, want)
}

func TestLintReadyRepository(t *testing.T) {
	version, problems := lintRepo(t, commit(t, goodFiles()), "")
	assert.Equal(t, "v0.1.0", version)
	assert.Empty(t, problems)
}

// The tree before real versions: placeholders and replace directives,
// no go.work. There is no version to check, and every problem is named.
func TestLintPlaceholdersAndReplaces(t *testing.T) {
	files := goodFiles()
	delete(files, "go.work")
	files["store/go.mod"] = "module example.com/lib/store\n\ngo 1.25\n\nrequire example.com/lib v0.0.0-00010101000000-000000000000\n\nreplace example.com/lib => ../\n"
	files["cmd/tool/go.mod"] = "module example.com/lib/cmd/tool\n\ngo 1.25\n\nrequire example.com/lib/store v0.0.0-00010101000000-000000000000\n\nreplace example.com/lib/store => ../../store\n"
	files["bench/go.mod"] = "module example.com/lib/bench\n\ngo 1.25\n"
	version, problems := lintRepo(t, commit(t, files), "")
	assert.Empty(t, version)
	hasProblems(t, problems,
		"store/go.mod: requires example.com/lib v0.0.0-00010101000000-000000000000: a placeholder",
		"cmd/tool/go.mod: requires example.com/lib/store v0.0.0-00010101000000-000000000000: a placeholder",
		"store/go.mod: 1 replace directive(s), for example.com/lib",
		"cmd/tool/go.mod: 1 replace directive(s), for example.com/lib/store",
		"no go.work at the root",
	)
	assert.Len(t, problems, 5)

	// With the version given, the problems stay and the version is
	// returned, so the install itself can show how it fails.
	version, problems = lintRepo(t, commit(t, files), "v0.1.0")
	assert.Equal(t, "v0.1.0", version)
	assert.Len(t, problems, 5, strings.Join(problems, "\n"))
}

func TestLintVersions(t *testing.T) {
	files := goodFiles()
	files["cmd/tool/go.mod"] = "module example.com/lib/cmd/tool\n\ngo 1.25\n\nrequire (\n\texample.com/lib v0.2.0\n\texample.com/lib/store v0.1.0\n\texample.com/lib/bench v0.1.0\n\texample.com/lib/gone v0.1.0\n)\n"
	files["store/go.mod"] = "module example.com/lib/storage\n\ngo 1.25\n\nrequire example.com/lib v0.0.0-20260101000000-abcdefabcdef\n"
	version, problems := lintRepo(t, commit(t, files), "")
	assert.Empty(t, version)
	hasProblems(t, problems,
		"the modules require each other at 2 versions, want one: v0.1.0 (",
		"v0.2.0 (cmd/tool requires example.com/lib)",
		"cmd/tool/go.mod: requires example.com/lib/bench, which is not released",
		"cmd/tool/go.mod: requires example.com/lib/gone, which is no module of this repository",
		"store/go.mod: module example.com/lib/storage, want example.com/lib/store",
		"requires example.com/lib v0.0.0-20260101000000-abcdefabcdef: a pseudo-version, not a release",
	)

	_, problems = lintRepo(t, commit(t, goodFiles()), "v0.2.0")
	hasProblems(t, problems, "not at v0.2.0: ")
	_, problems = lintRepo(t, commit(t, goodFiles()), "v1.0")
	hasProblems(t, problems, "-version v1.0: not a canonical semantic version")
}

func TestLintWorkspace(t *testing.T) {
	files := goodFiles()
	files["go.work"] = "go 1.25.0\n\nuse (\n\t.\n\t./store\n\t./old\n)\n\n" +
		"replace example.com/lib v0.0.9 => ./\n\nreplace example.com/lib/store => ./store\n\nreplace golang.org/x/sys v0.1.0 => ../sys\n"
	_, problems := lintRepo(t, commit(t, files), "")
	hasProblems(t, problems,
		"go.work does not use ./cmd/tool",
		"go.work does not use ./bench",
		"go.work uses ./old, which has no go.mod in the commit",
		"go.work replaces example.com/lib v0.0.9, not the release version v0.1.0",
		"go.work replaces example.com/lib/store at every version",
		"go.work replaces golang.org/x/sys: the workspace would build with code that users do not get",
		"go.work has no replace for example.com/lib v0.1.0",
		"go.work has no replace for example.com/lib/store v0.1.0",
	)
	assert.Len(t, problems, 8)
}

// A module zip holds the committed files only: not a change in the working
// tree, not an untracked file, not a nested module's files. A module in a
// subdirectory without a LICENSE gets the root's.
func TestZipsComeFromTheCommit(t *testing.T) {
	dir := commit(t, goodFiles())
	writeFiles(t, dir, map[string]string{"lib.go": "package changed\n", "new.go": "package lib\n", "store/new.go": "package store\n"})
	tr, err := readTree(dir, "HEAD")
	require.NoError(t, err)
	mods, err := tr.modules([]string{"bench"})
	require.NoError(t, err)
	require.Equal(t, []string{"", "bench", "cmd/tool", "store"}, dirsOf(mods))

	contents := func(m *mod) map[string]string {
		var buf bytes.Buffer
		require.NoError(t, modzip.Create(&buf, versionOf(m, "v0.1.0"), tr.zipFiles(m)))
		zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		require.NoError(t, err)
		got := map[string]string{}
		for _, f := range zr.File {
			rc, err := f.Open()
			require.NoError(t, err)
			data, err := io.ReadAll(rc)
			require.NoError(t, err)
			got[f.Name] = string(data)
		}
		return got
	}
	rootZip := contents(mods[0])
	assert.Equal(t, "package lib\n", rootZip["example.com/lib@v0.1.0/lib.go"])
	assert.Equal(t, []string{"LICENSE", "examples/demo/m.go", "gen.go", "go.mod", "go.work", "internal/x/x.go", "lib.go"}, names(rootZip, "example.com/lib@v0.1.0/"))

	storeZip := contents(mods[3])
	assert.Equal(t, []string{"LICENSE", "go.mod", "store.go", "testdata/t.go"}, names(storeZip, "example.com/lib/store@v0.1.0/"))
	assert.Equal(t, "license text\n", storeZip["example.com/lib/store@v0.1.0/LICENSE"])

	toolZip := contents(mods[2])
	assert.Equal(t, "the tool's own license\n", toolZip["example.com/lib/cmd/tool@v0.1.0/LICENSE"])
}

func TestFindPackages(t *testing.T) {
	tr, err := readTree(commit(t, goodFiles()), "HEAD")
	require.NoError(t, err)
	mods, err := tr.modules(nil)
	require.NoError(t, err)
	for _, m := range mods {
		require.NoError(t, tr.findPackages(m))
	}
	// Not internal/x, not the example, not the ignored generator, not
	// testdata.
	assert.Equal(t, []string{"example.com/lib"}, mods[0].libs)
	assert.Empty(t, mods[0].cmds)
	assert.Empty(t, mods[1].libs, "a module of tests only has no package to import")
	assert.Equal(t, []string{"example.com/lib/cmd/tool"}, mods[2].cmds)
	assert.Empty(t, mods[2].libs)
	assert.Equal(t, []string{"example.com/lib/store"}, mods[3].libs)
}

func TestProgramIsGoCode(t *testing.T) {
	src := program(root, []string{root, root + "/store", root + "/store/sub"})
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", src, parser.ImportsOnly)
	require.NoError(t, err)
	var imports []string
	for _, spec := range f.Imports {
		imports = append(imports, spec.Path.Value)
	}
	assert.Equal(t, []string{`"context"`, `"fmt"`, `"os"`, `"example.com/lib"`, `"example.com/lib/store"`, `"example.com/lib/store/sub"`}, imports)
}

func TestSetVersion(t *testing.T) {
	dir := commit(t, goodFiles())
	var out bytes.Buffer
	require.NoError(t, setVersion(dir, "v0.2.0", &out))
	assert.Contains(t, out.String(), "updated ")
	for _, args := range [][]string{
		{"add", "-A"},
		{"-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "v0.2.0"},
	} {
		got, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", got)
	}
	version, problems := lintRepo(t, dir, "")
	assert.Equal(t, "v0.2.0", version)
	assert.Empty(t, problems)
	work, err := os.ReadFile(filepath.Join(dir, "go.work"))
	require.NoError(t, err)
	assert.Contains(t, string(work), "example.com/lib v0.2.0 => ./\n")
	assert.Contains(t, string(work), "example.com/lib/store v0.2.0 => ./store\n")
	assert.NotContains(t, string(work), "v0.1.0")

	out.Reset()
	require.NoError(t, setVersion(dir, "v0.2.0", &out))
	assert.Empty(t, out.String(), "nothing left to change")
	assert.ErrorContains(t, setVersion(dir, "v0.0.0-00010101000000-000000000000", &out), "a placeholder")
}

func TestPrintTags(t *testing.T) {
	dir := commit(t, goodFiles())
	var out bytes.Buffer
	require.NoError(t, printTags(dir, "HEAD", []string{"bench"}, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	assert.True(t, strings.HasPrefix(lines[0], `git tag -a v0.1.0 -m "example.com/lib v0.1.0" `), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], `git tag -a cmd/tool/v0.1.0 -m "example.com/lib/cmd/tool v0.1.0" `), lines[1])
	assert.True(t, strings.HasPrefix(lines[2], `git tag -a store/v0.1.0 `), lines[2])
	assert.Equal(t, "git push origin v0.1.0 cmd/tool/v0.1.0 store/v0.1.0", lines[3])

	files := goodFiles()
	delete(files, "go.work")
	assert.ErrorContains(t, printTags(commit(t, files), "HEAD", nil, &out), "not ready for a release")
}

// hasProblems checks that each of wants is part of some problem.
func hasProblems(t *testing.T, problems []string, wants ...string) {
	t.Helper()
	all := strings.Join(problems, "\n")
	for _, want := range wants {
		assert.Contains(t, all, want)
	}
}

func dirsOf(mods []*mod) []string {
	var dirs []string
	for _, m := range mods {
		dirs = append(dirs, m.dir)
	}
	return dirs
}

func names(files map[string]string, prefix string) []string {
	var out []string
	for name := range files {
		out = append(out, strings.TrimPrefix(name, prefix))
	}
	slices.Sort(out)
	return out
}

// go mod tidy outside the workspace, against the working tree's modules
// at the release version: a missing requirement is found, and the go.sum
// keeps no line for our own modules.
func TestTidy(t *testing.T) {
	files := goodFiles()
	files["store/store.go"] = "package store\n\nimport _ \"example.com/lib\"\n"
	files["store/go.mod"] = "module example.com/lib/store\n\ngo 1.25\n"
	files["bench/go.mod"] = "module example.com/lib/bench\n\ngo 1.25\n\nrequire example.com/lib v0.1.0\n\nrequire example.com/lib/store v0.1.0 // indirect\n"
	dir := commit(t, files)

	var out bytes.Buffer
	require.ErrorIs(t, tidy(dir, true, nil, &out), errFailed)
	assert.Contains(t, out.String(), "store: not tidy\n  store/go.mod: + require example.com/lib v0.1.0\n")
	assert.Contains(t, out.String(), "bench: not tidy\n  bench/go.mod: - require example.com/lib/store v0.1.0 // indirect\n")
	assert.Contains(t, out.String(), "tidy FAILED: go mod tidy would change 2 module(s)")
	data, err := os.ReadFile(filepath.Join(dir, "store", "go.mod"))
	require.NoError(t, err)
	assert.Equal(t, files["store/go.mod"], string(data), "-check changes nothing")
	assert.NoFileExists(t, filepath.Join(dir, "store", "go.sum"))

	out.Reset()
	require.NoError(t, tidy(dir, false, []string{"store"}, &out))
	assert.Equal(t, "tidied store\n", out.String())
	data, err = os.ReadFile(filepath.Join(dir, "store", "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(data), "require example.com/lib v0.1.0\n")
	if sum, err := os.ReadFile(filepath.Join(dir, "store", "go.sum")); err == nil {
		assert.NotContains(t, string(sum), "example.com/lib")
	}

	require.NoError(t, tidy(dir, false, nil, &out))
	out.Reset()
	require.NoError(t, tidy(dir, true, nil, &out))
	assert.Contains(t, out.String(), "tidy: every module's go.mod and go.sum are tidy, outside the workspace, at v0.1.0\n")
}
