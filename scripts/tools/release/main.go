// Command release checks and prepares a release of every module in this
// repository, all at one version.
//
//	release check [-repo DIR] [-rev REV] [-version V] [-unpublished DIRS] [-keep]
//	release set-version [-repo DIR] VERSION
//	release tidy [-repo DIR] [-check] [DIR...]
//	release tags [-repo DIR] [-rev REV] [-unpublished DIRS]
//
// check proves that the modules install the way a user gets them. From the
// committed tree at REV (default HEAD; never the working tree) it builds a
// module proxy on disk holding every published module at the version the
// modules require of each other, then, in fresh temporary modules with
// GOWORK=off, a fresh module cache and that proxy first, it runs go get of
// each library module, builds and runs a program importing every library
// package, and runs go install of each command at the version and at
// @latest, then the command with -h. It first checks the go.mod and go.work
// files: one release version, no pseudo-versions, no replace or exclude
// directives, a go.work that lists every module; and the subject of every
// commit since the last release tag (before the first tag, since
// commitBaseline): "area: what changed", at most 72 characters.
//
// set-version rewrites, in the working tree, every requirement between
// the repository's modules and the go.work replacements to VERSION.
//
// tidy runs go mod tidy in every module (or those in the directories
// named) as outside the workspace, where it cannot run before the release
// version is published; with -check it only reports.
//
// tags prints the git tag commands for the version of REV.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// defaultUnpublished are the module directories that are not released:
// they are for development only.
const defaultUnpublished = "benchmarks,examples/notify,scripts/tools"

// errFailed reports a check that printed its own findings.
var errFailed = errors.New("release check failed")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: release check|set-version|tidy|tags [flags]")
		return 2
	}
	fs := flag.NewFlagSet("release "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", ".", "a directory inside the git repository")
	var err error
	switch args[0] {
	case "check":
		rev := fs.String("rev", "HEAD", "the git revision to release")
		version := fs.String("version", "", "the version to check (default: the one the modules require of each other)")
		unpublished := fs.String("unpublished", defaultUnpublished, "comma-separated module directories that are not released")
		keep := fs.Bool("keep", false, "keep the temporary directory and print its name")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		err = check(checkConfig{repo: *repo, rev: *rev, version: *version, baseline: commitBaseline, unpublished: splitList(*unpublished), keep: *keep}, stdout)
	case "set-version":
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "usage: release set-version [-repo DIR] vX.Y.Z")
			return 2
		}
		err = setVersion(*repo, fs.Arg(0), stdout)
	case "tidy":
		check := fs.Bool("check", false, "change nothing; fail if a module is not tidy")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		err = tidy(*repo, *check, splitList(strings.Join(fs.Args(), ",")), stdout)
	case "tags":
		rev := fs.String("rev", "HEAD", "the git revision to tag")
		unpublished := fs.String("unpublished", defaultUnpublished, "comma-separated module directories that are not released")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		err = printTags(*repo, *rev, splitList(*unpublished), stdout)
	default:
		fmt.Fprintf(stderr, "release: unknown command %q; want check, set-version, tidy or tags\n", args[0])
		return 2
	}
	if err != nil {
		if !errors.Is(err, errFailed) {
			fmt.Fprintln(stderr, "release:", err)
		}
		return 1
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.Trim(strings.TrimSpace(f), "/"); f != "" {
			out = append(out, f)
		}
	}
	return out
}
