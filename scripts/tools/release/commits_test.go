package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLintSubject(t *testing.T) {
	for _, tc := range []struct {
		subject string
		ok      bool
	}{
		{"retryhttp: keep the Retrier's own WithName for its requests", true},
		{"cmd/deadletters: redrive reads the file one record at a time", true},
		{"README: unknown outcomes, claim renewal, and what is dead-lettered", true},
		{"internal/clip: one bound on a dead letter's error texts", true},
		{"deadletter, pgdeadletter: bound the error texts", true},
		{"go.work: replace each module at the release version", true},
		{"a: " + strings.Repeat("x", 69), true},   // 72 characters
		{"a: " + strings.Repeat("é", 69), true},   // 72 characters, more bytes
		{"a: " + strings.Repeat("x", 70), false},  // 73 characters
		{"dead letters: Do stops waiting", false}, // an area has no space
		{"Fix the budget", false},                 // no area
		{"retryhttp:keep the name", false},        // no space after the colon
		{"retryhttp:  keep the name", false},      // nothing right after it
		{"retryhttp: ", false},                    // no what
		{": keep the name", false},                // no area
		{"-x: keep the name", false},              // an area starts with a letter or digit
		{"retryhttp,budget: keep the name", false},
		{"", false},
	} {
		err := lintSubject(tc.subject)
		if tc.ok {
			assert.NoError(t, err, "%q", tc.subject)
		} else {
			assert.Error(t, err, "%q", tc.subject)
		}
	}
}

// gitRepo makes an empty repository and returns its directory and a
// function that runs git in it.
func gitRepo(t *testing.T) (string, func(args ...string) string) {
	t.Helper()
	dir := t.TempDir()
	g := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	g("init", "-q", "-b", "main")
	return dir, g
}

func TestLintCommits(t *testing.T) {
	dir, g := gitRepo(t)
	g("commit", "-q", "--allow-empty", "-m", "Old commit, before the rule")
	baseline := g("rev-parse", "HEAD")
	g("commit", "-q", "--allow-empty", "-m", "docs: a good subject\n\nThe reasoning.")
	g("checkout", "-q", "-b", "side")
	g("commit", "-q", "--allow-empty", "-m", "retryhttp: on a branch")
	g("checkout", "-q", "main")
	g("commit", "-q", "--allow-empty", "-m", "a bad subject")
	bad := g("rev-parse", "--short=12", "HEAD")
	g("merge", "-q", "--no-ff", "-m", "Merge branch 'side'", "side") // merges are exempt

	summary, problems := lintCommits(dir, "HEAD", baseline)
	assert.Equal(t, "commit messages: 3 commit(s) after "+short(baseline)+" checked, merges aside", summary)
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], "commit "+bad+` "a bad subject": subject does not start with an area`)
	assert.Contains(t, problems[0], `"area: what changed", at most 72 characters`)

	// A release tag after the baseline starts the range.
	g("tag", "-a", "v0.1.0", "-m", "v0.1.0")
	g("commit", "-q", "--allow-empty", "-m", "budget: after the tag")
	summary, problems = lintCommits(dir, "HEAD", baseline)
	assert.Empty(t, problems)
	assert.Equal(t, "commit messages: 1 commit(s) after v0.1.0 checked, merges aside", summary)
	// A sub-module's tag is no release tag of the root.
	g("tag", "-a", "store/v0.2.0", "-m", "store/v0.2.0")
	_, problems = lintCommits(dir, "HEAD", baseline)
	assert.Empty(t, problems)
}

func TestLintCommitsWithoutTheBaseline(t *testing.T) {
	dir, g := gitRepo(t)
	g("commit", "-q", "--allow-empty", "-m", "docs: a good subject")
	missing := strings.Repeat("ab", 20)
	summary, problems := lintCommits(dir, "HEAD", missing)
	assert.Empty(t, summary)
	require.Len(t, problems, 1)
	assert.Equal(t, "commit messages: no release tag, and the baseline commit abababababab (commitBaseline in scripts/tools/release/commits.go) is not in this clone", problems[0])

	// A baseline on another branch is no starting point either.
	g("checkout", "-q", "--orphan", "other")
	g("commit", "-q", "--allow-empty", "-m", "docs: elsewhere")
	other := g("rev-parse", "HEAD")
	g("checkout", "-q", "main")
	_, problems = lintCommits(dir, "HEAD", other)
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], "is not an ancestor of HEAD")
}
