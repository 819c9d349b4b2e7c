package main

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// commitBaseline is the last commit that the commit-message rule does
// not check: the head of main when the rule was adopted (issue #23). The
// commits before it were written before the rule, many against it, and
// history is never rewritten; every commit after it must follow the rule.
// Once the repository has a release tag, the range starts at the last tag
// instead, and this baseline no longer matters.
const commitBaseline = "4db2d8aa4ad4372d6169d1e60a8def7a8dd5fae1"

// maxSubject is the most characters a commit subject may have.
const maxSubject = 72

// subjectRule is the rule's wording in every problem it reports.
const subjectRule = `"area: what changed", at most 72 characters, the reasoning in the body`

// subjectPattern is "area: what changed": one or more areas (a package,
// directory or file such as retryhttp, cmd/deadletters, README), separated
// by ", ", then a colon, a space, and what changed.
var subjectPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*(, [A-Za-z0-9][A-Za-z0-9._/-]*)*: \S`)

// lintSubject says why a commit subject breaks the rule, or nil.
func lintSubject(subject string) error {
	if n := utf8.RuneCountInString(subject); n > maxSubject {
		return fmt.Errorf("subject has %d characters, more than %d", n, maxSubject)
	}
	if !subjectPattern.MatchString(subject) {
		return fmt.Errorf("subject does not start with an area, a colon and a space")
	}
	return nil
}

// lintCommits checks the subject of every commit, merges aside, after the
// last release tag reachable from rev, or, before the first tag, after
// baseline. It returns the problems found, one per commit, each naming
// the commit and the rule, and a line saying what it checked.
func lintCommits(repo, rev, baseline string) (string, []string) {
	from, err := commitRange(repo, rev, baseline)
	if err != nil {
		return "", []string{"commit messages: " + err.Error()}
	}
	out, err := git(repo, "log", "--no-merges", "--format=%H %s", from+".."+rev)
	if err != nil {
		return "", []string{"commit messages: " + err.Error()}
	}
	var problems []string
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		n++
		hash, subject, _ := strings.Cut(line, " ")
		if err := lintSubject(subject); err != nil {
			problems = append(problems, fmt.Sprintf("commit %s %q: %v; the rule is %s (CONTRIBUTING.md)", short(hash), subject, err, subjectRule))
		}
	}
	return fmt.Sprintf("commit messages: %d commit(s) after %s checked, merges aside", n, short(from)), problems
}

// commitRange returns the commit after which lintCommits checks: the
// last release tag (vX.Y.Z of the root module) reachable from rev, unless
// the baseline comes after it, else the baseline.
func commitRange(repo, rev, baseline string) (string, error) {
	tag, tagErr := git(repo, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", rev)
	if _, err := git(repo, "rev-parse", "--verify", "--quiet", baseline+"^{commit}"); err != nil {
		if tagErr == nil {
			return tag, nil
		}
		hint := ""
		if shallow, _ := git(repo, "rev-parse", "--is-shallow-repository"); shallow == "true" {
			hint = "; this clone is shallow: git fetch --unshallow"
		}
		return "", fmt.Errorf("no release tag, and the baseline commit %s (commitBaseline in scripts/tools/release/commits.go) is not in this clone%s", short(baseline), hint)
	}
	if _, err := git(repo, "merge-base", "--is-ancestor", baseline, rev); err != nil {
		if tagErr == nil {
			return tag, nil
		}
		return "", fmt.Errorf("no release tag, and the baseline commit %s (commitBaseline in scripts/tools/release/commits.go) is not an ancestor of %s", short(baseline), rev)
	}
	if tagErr == nil {
		if _, err := git(repo, "merge-base", "--is-ancestor", baseline, tag); err == nil {
			return tag, nil // the tag comes after the baseline
		}
	}
	return baseline, nil
}
