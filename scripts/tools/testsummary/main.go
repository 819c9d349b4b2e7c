// Command testsummary makes skipped tests visible. It reads the output
// of go test -json and prints what go test prints without -json: each
// package's ok or FAIL line and the output of failed tests. It appends a
// summary of the run to a file; report prints those summaries: per
// module, how many tests passed, failed and skipped, then every skipped
// test with its reason, and a closing "N passed, N failed, N skipped".
//
//	go test -json ./... | testsummary record -to FILE -module PATH -run LABEL
//	testsummary note -to FILE MESSAGE...
//	testsummary skipped -module PATH -run LABEL [-reason REGEXP] FILE
//	testsummary report [-allow-skips REGEXP] FILE
//
// skipped prints, for a run recorded in FILE, a go test -run pattern that
// selects every top-level test that skipped in it (or that has a skipped
// subtest), with -reason only those whose reason matches, on its first
// line, then the packages they are in, one a line; nothing when none did.
//
// With -allow-skips, a skip whose "TestName: reason" does not match the
// regular expression fails the report: under CI=true no test may skip for
// lack of a server.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: testsummary record|note|report [flags]")
		return 2
	}
	fs := flag.NewFlagSet("testsummary "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch args[0] {
	case "record":
		to := fs.String("to", "", "the file to append the run's summary to")
		module := fs.String("module", "", "the module the packages belong to")
		label := fs.String("run", "", "what sets this run apart, such as -race")
		if fs.Parse(args[1:]) != nil || *to == "" {
			fmt.Fprintln(stderr, "usage: go test -json ... | testsummary record -to FILE -module PATH [-run LABEL]")
			return 2
		}
		r, err := record(stdin, stdout)
		if err == nil {
			r.Module, r.Run = *module, *label
			err = appendJSON(*to, r)
		}
		if err != nil {
			fmt.Fprintln(stderr, "testsummary:", err)
			return 1
		}
		if r.Failed > 0 {
			return 1
		}
	case "note":
		to := fs.String("to", "", "the file to append the note to")
		if fs.Parse(args[1:]) != nil || *to == "" || fs.NArg() == 0 {
			fmt.Fprintln(stderr, "usage: testsummary note -to FILE MESSAGE...")
			return 2
		}
		if err := appendJSON(*to, runSummary{Note: strings.Join(fs.Args(), " ")}); err != nil {
			fmt.Fprintln(stderr, "testsummary:", err)
			return 1
		}
	case "skipped":
		module := fs.String("module", "", "the module of the run")
		label := fs.String("run", "", "the run's label")
		reasonRE := fs.String("reason", "", "only the skips whose reason matches this regular expression")
		if fs.Parse(args[1:]) != nil || fs.NArg() != 1 {
			fmt.Fprintln(stderr, "usage: testsummary skipped -module PATH -run LABEL [-reason REGEXP] FILE")
			return 2
		}
		why, err := regexp.Compile(*reasonRE)
		if err != nil {
			fmt.Fprintln(stderr, "testsummary: -reason:", err)
			return 2
		}
		runs, err := readRuns(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "testsummary:", err)
			return 1
		}
		if pattern, pkgs := skipped(runs, *module, *label, why); pattern != "" {
			fmt.Fprintln(stdout, pattern)
			for _, p := range pkgs {
				fmt.Fprintln(stdout, p)
			}
		}
	case "report":
		allow := fs.String("allow-skips", "", "with it, a skip whose \"TestName: reason\" does not match this regular expression fails")
		if fs.Parse(args[1:]) != nil || fs.NArg() != 1 {
			fmt.Fprintln(stderr, "usage: testsummary report [-allow-skips REGEXP] FILE")
			return 2
		}
		var allowRE *regexp.Regexp
		if *allow != "" {
			var err error
			if allowRE, err = regexp.Compile(*allow); err != nil {
				fmt.Fprintln(stderr, "testsummary: -allow-skips:", err)
				return 2
			}
		}
		runs, err := readRuns(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "testsummary:", err)
			return 1
		}
		if !report(runs, allowRE, stdout) {
			return 1
		}
	default:
		fmt.Fprintf(stderr, "testsummary: unknown command %q\n", args[0])
		return 2
	}
	return 0
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // of build-output events
	Test       string
	Output     string
}

// runSummary is what record appends for one go test run, or a note.
type runSummary struct {
	Module  string   `json:"module,omitempty"`
	Run     string   `json:"run,omitempty"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	Skipped int      `json:"skipped"`
	Skips   []result `json:"skips,omitempty"`
	Fails   []result `json:"fails,omitempty"`
	Note    string   `json:"note,omitempty"`
}

type result struct {
	Package string `json:"package"`
	Test    string `json:"test,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// record reads go test -json from r and writes to w what go test would
// print without -json. Lines that are not JSON are copied as they are.
func record(r io.Reader, w io.Writer) (runSummary, error) {
	var sum runSummary
	outputs := map[[2]string][]string{} // test output so far, by package and test
	failedTests := map[string]bool{}    // packages with a failed test
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "output" && e.Test != "":
			outputs[key] = append(outputs[key], e.Output)
		case e.Action == "output":
			// The bare PASS line is the test binary's; go test shows ok.
			if e.Output != "PASS\n" {
				fmt.Fprint(w, e.Output)
			}
		case e.Test != "" && e.Action == "pass":
			sum.Passed++
			delete(outputs, key)
		case e.Test != "" && e.Action == "skip":
			sum.Skipped++
			sum.Skips = append(sum.Skips, result{Package: e.Package, Test: e.Test, Reason: reason(outputs[key])})
			delete(outputs, key)
		case e.Test != "" && e.Action == "fail":
			sum.Failed++
			failedTests[e.Package] = true
			sum.Fails = append(sum.Fails, result{Package: e.Package, Test: e.Test})
			for _, out := range outputs[key] {
				if !isFrame(out) {
					fmt.Fprint(w, out)
				}
			}
			delete(outputs, key)
		case e.Action == "fail" && e.Test == "":
			// A test that never ended (a timeout's panic, a crash) holds
			// the reason in its output: print it.
			printUnfinished(w, outputs, e.Package)
			if !failedTests[e.Package] {
				// A package that failed with no failed test: it did not
				// build, or TestMain, a leak check or a crash failed it.
				sum.Failed++
				sum.Fails = append(sum.Fails, result{Package: e.Package})
			}
		}
	}
	// go test runs packages in parallel, so their events interleave in
	// no fixed order: sort, so that the same run reads the same.
	for _, rs := range [][]result{sum.Skips, sum.Fails} {
		slices.SortStableFunc(rs, func(a, b result) int {
			return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Test, b.Test))
		})
	}
	return sum, sc.Err()
}

// printUnfinished prints, and forgets, the output of pkg's tests that
// never ended, in the order of their names.
func printUnfinished(w io.Writer, outputs map[[2]string][]string, pkg string) {
	var keys [][2]string
	for k := range outputs {
		if k[0] == pkg {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Compare(a[1], b[1]) })
	for _, k := range keys {
		fmt.Fprintf(w, "--- UNFINISHED: %s\n", k[1])
		for _, out := range outputs[k] {
			if !isFrame(out) {
				fmt.Fprint(w, out)
			}
		}
		delete(outputs, k)
	}
}

// isFrame says whether a line of test output is test2json's framing of
// a test, which go test without -v does not print.
func isFrame(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// reason is what a skipped test printed, on one line, without framing.
func reason(lines []string) string {
	var parts []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || isFrame(l) || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		parts = append(parts, l)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}

func appendJSON(name string, v runSummary) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	return errors.Join(err, f.Close())
}

func readRuns(name string) ([]runSummary, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var runs []runSummary
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var r runSummary
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// skipped returns a -run pattern for the top-level tests that skipped, or
// had a subtest skip, for a reason that why matches, in the run of module
// labelled label, and their packages, both sorted.
func skipped(runs []runSummary, module, label string, why *regexp.Regexp) (pattern string, pkgs []string) {
	var tests []string
	for _, r := range runs {
		if r.Note != "" || r.Module != module || r.Run != label {
			continue
		}
		for _, s := range r.Skips {
			if !why.MatchString(s.Reason) {
				continue
			}
			top, _, _ := strings.Cut(s.Test, "/")
			tests = append(tests, regexp.QuoteMeta(top))
			pkgs = append(pkgs, s.Package)
		}
	}
	if len(tests) == 0 {
		return "", nil
	}
	slices.Sort(tests)
	slices.Sort(pkgs)
	return "^(" + strings.Join(slices.Compact(tests), "|") + ")$", slices.Compact(pkgs)
}

// report prints the summary and says whether the runs passed.
func report(runs []runSummary, allow *regexp.Regexp, w io.Writer) bool {
	var total runSummary
	var notes []string
	var disallowed []string
	type skipKey struct{ pkg, test, reason string }
	var skipOrder []skipKey
	skipRuns := map[skipKey][]string{}

	fmt.Fprintf(w, "\n== tests by module\n%7s %7s %8s  %s\n", "passed", "failed", "skipped", "module")
	for _, r := range runs {
		if r.Note != "" {
			notes = append(notes, r.Note)
			continue
		}
		fmt.Fprintf(w, "%7d %7d %8d  %s\n", r.Passed, r.Failed, r.Skipped, withRun(r.Module, r.Run))
		total.Passed += r.Passed
		total.Failed += r.Failed
		total.Skipped += r.Skipped
		for _, s := range r.Skips {
			k := skipKey{s.Package, s.Test, s.Reason}
			if _, seen := skipRuns[k]; !seen {
				skipOrder = append(skipOrder, k)
			}
			skipRuns[k] = append(skipRuns[k], r.Run)
			if allow != nil && !allow.MatchString(s.Test+": "+s.Reason) {
				disallowed = append(disallowed, withRun(s.Package+" "+s.Test, r.Run))
			}
		}
		for _, f := range r.Fails {
			if f.Test == "" {
				notes = append(notes, fmt.Sprintf("package %s failed: it did not build, or TestMain or a crash failed it", withRun(f.Package, r.Run)))
			}
		}
	}

	if len(skipOrder) > 0 {
		fmt.Fprintf(w, "\n== skipped tests (%d, in %d places)\n", total.Skipped, len(skipOrder))
		for _, k := range skipOrder {
			fmt.Fprintf(w, "%s: %s\n", withRun(k.pkg+" "+k.test, strings.Join(skipRuns[k], ", ")), k.reason)
		}
	}
	if len(disallowed) > 0 {
		fmt.Fprintf(w, "\n== FAILED: skipped, but only skips matching %q may skip here (a missing server must fail):\n", allow)
		for _, d := range disallowed {
			fmt.Fprintln(w, d)
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, "FAILED:", n)
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", total.Passed, total.Failed, total.Skipped)
	return total.Failed == 0 && len(disallowed) == 0 && len(notes) == 0
}

// withRun is what, followed by the run's label if it has one.
func withRun(what, run string) string {
	if strings.Trim(run, ", ") == "" {
		return what
	}
	return what + " (" + run + ")"
}
