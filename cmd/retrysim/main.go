// Command retrysim runs scenarios of overload against the real code of
// github.com/steadfast-go/retry in virtual time, and writes what it
// measured as charts (PNG and SVG, drawn with gonum/plot) and Markdown
// tables:
//
//	a  Brooker's contention model: N clients on one row with optimistic
//	   concurrency; calls and completion time for no jitter, full, equal
//	   and decorrelated jitter, over many runs.
//	b  a full outage under an open-loop load: downstream attempts per
//	   second without a budget, with the default token bucket and with the
//	   default ratio budget, and how long calls fail once it is back.
//	c  5 % random failures: the success rate with a budget and without.
//	d  three nested Retriers of 3 attempts during an outage: leaf calls
//	   per user call with the one-layer rule and without it.
//	e  the outage of b with a circuit breaker (sony/gobreaker) as the gate.
//	f  a blip: steady traffic, then one second in which every call's first
//	   attempt fails; the share of those calls that succeed, and the
//	   downstream load, for each budget.
//	g  a heavy tail (1 % of attempts take 1 s): call latency percentiles
//	   and downstream load without hedging, with a fixed hedge delay and
//	   with the adaptive one; and the load of b's outage with hedging.
//	h  a metastable failure: a downstream whose latency grows with its
//	   queue, clients with attempt timeouts and retries, and a 10 s drop
//	   of its capacity; goodput over time, the time to recover after the
//	   drop and the peak load without protection, with the default
//	   budget, with an adaptive concurrency limit and with both.
//	i  a rate limit with Retry-After: 1,000 clients on a downstream
//	   that admits 200 requests a second in fixed windows of 10 s and
//	   answers 429 beyond; the 429s and the spike of requests after
//	   each reset without a shared pause, with overload.Pause, and
//	   with the pause and overload.Rate.
//
// Usage:
//
//	retrysim [-seed N] [-runs N] [-clients N] [-scenario a|b|c|d|e|f|g|h|i|all] [-out DIR] [-doc FILE]
//
// The same flags give the same output, byte for byte: every simulated
// goroutine runs in turn in virtual time, and every random draw comes
// from a source seeded by -seed. The repository's documentation is made
// with
//
//	go run ./cmd/retrysim -out docs/overload -doc docs/overload.md
//
// which rewrites the blocks between <!-- retrysim:KEY --> and
// <!-- /retrysim:KEY --> in docs/overload.md. Exit status: 0 when every
// bound is met, 1 when one is not or the output cannot be written, 2 for
// a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// config is a whole run of the command.
type config struct {
	seed       uint64
	scenarios  string // the letters of the scenarios to run, in order
	out, doc   string
	contention contentionParams
	outage     outageParams
	failures   failuresParams
	nested     nestedParams
	blip       blipParams
	tail       tailParams
	metastable metastableParams
	limited    limitedParams
}

// defaultConfig is the run that the flags' defaults ask for.
func defaultConfig(seed uint64) config {
	return config{
		seed: seed, scenarios: allScenarios, out: filepath.Join("docs", "overload"),
		contention: contentionParams{clients: 100, runs: 100, seed: seed, base: 5 * time.Millisecond, cap: 2 * time.Second},
		outage:     defaultOutage(seed),
		failures:   defaultFailures(seed),
		nested:     defaultNested(seed),
		blip:       defaultBlip(seed),
		tail:       defaultTail(seed),
		metastable: defaultMetastable(seed),
		limited:    defaultLimited(seed),
	}
}

// allScenarios are the letters of every scenario, in order.
const allScenarios = "abcdefghi"

func (c config) has(scenario byte) bool { return strings.IndexByte(c.scenarios, scenario) >= 0 }

// commandLine is the flags of the run, each spelled out: those that
// reproduce the numbers (-runs and -clients only when scenario a ran:
// no other uses them), then where the output went.
func (c config) commandLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "-seed %d", c.seed)
	if c.has('a') {
		fmt.Fprintf(&b, " -runs %d -clients %d", c.contention.runs, c.contention.clients)
	}
	s := "all"
	if c.scenarios != allScenarios {
		s = c.scenarios
	}
	fmt.Fprintf(&b, " -scenario %s -out %s", s, shellArg(c.out))
	if c.doc != "" {
		fmt.Fprintf(&b, " -doc %s", shellArg(c.doc))
	}
	return b.String()
}

// shellArg is s as one shell word: as it is when no shell would split
// or expand it, else in single quotes.
func shellArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// docLink is the Markdown link from results.md, in the directory out,
// to the document doc, or "" when there is none that is right: no -doc
// (where the prose is, results.md cannot know), or a path a link cannot
// hold.
func docLink(out, doc string) string {
	if doc == "" {
		return ""
	}
	absOut, err1 := filepath.Abs(out)
	absDoc, err2 := filepath.Abs(doc)
	rel, err3 := filepath.Rel(absOut, absDoc)
	if err := errors.Join(err1, err2, err3); err != nil || strings.ContainsAny(rel, "<>[]`\n\r") {
		return ""
	}
	rel = filepath.ToSlash(rel)
	target := rel
	if strings.ContainsAny(rel, " ()") {
		target = "<" + rel + ">"
	}
	return "[" + rel + "](" + target + ")"
}

const usage = `usage: retrysim [-seed N] [-runs N] [-clients N] [-scenario a|b|c|d|e|f|g|h|i|all] [-out DIR] [-doc FILE]

Runs overload scenarios against github.com/steadfast-go/retry in virtual
time and writes PNG and SVG charts and results.md to DIR; with -doc, also
rewrites the <!-- retrysim:KEY --> blocks of FILE. The same flags give the
same output, but for scenario i's shared pause, whose draws no seed reaches.

`

// parse reads the command line.
func parse(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("retrysim", flag.ContinueOnError)
	// Errors are printed once, by run; only -h prints the usage.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	seed := fs.Uint64("seed", 1, "seed of every random source")
	runs := fs.Int("runs", 100, "runs of scenario a, in [1, 10000]")
	clients := fs.Int("clients", 100, "clients of scenario a, in [1, 10000]")
	scenario := fs.String("scenario", "all", "the scenario to run: a, b, c, d, e, f, g, h, i or all")
	out := fs.String("out", filepath.Join("docs", "overload"), "directory for the charts and results.md (made if missing)")
	doc := fs.String("doc", "", "Markdown file whose retrysim blocks to rewrite with the results, and that results.md links to (none if empty)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usage)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
		return config{}, err
	}
	cfg := defaultConfig(*seed)
	cfg.out, cfg.doc = *out, *doc
	cfg.contention.runs, cfg.contention.clients = *runs, *clients
	switch s := *scenario; {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q: retrysim takes flags only", fs.Arg(0))
	case s == "all":
	case len(s) == 1 && strings.Contains(allScenarios, s):
		cfg.scenarios = s
	default:
		return cfg, fmt.Errorf("-scenario %q: want a, b, c, d, e, f, g, h, i or all", s)
	}
	switch {
	case *runs < 1 || *runs > 10000:
		return cfg, fmt.Errorf("-runs %d: want a number of runs in [1, 10000]", *runs)
	case *clients < 1 || *clients > 10000:
		return cfg, fmt.Errorf("-clients %d: want a number of clients in [1, 10000]", *clients)
	case *out == "":
		return cfg, errors.New("-out: want a directory")
	}
	return cfg, nil
}

// run runs the command line args (without the program's name) and
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "retrysim: %v\n", err)
		fmt.Fprint(stderr, "Run 'retrysim -h' for the flags.\n")
		return exitUsage
	}
	start := time.Now()
	res, err := simulate(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "retrysim: %v\n", err)
		return exitFail
	}
	files, err := write(res)
	if err != nil {
		fmt.Fprintf(stderr, "retrysim: %v\n", err)
		return exitFail
	}
	failed := summary(stdout, res, files, time.Since(start))
	if failed > 0 {
		fmt.Fprintf(stderr, "retrysim: %d bound(s) not met\n", failed)
		return exitFail
	}
	return exitOK
}

// simulate runs the scenarios of cfg.
func simulate(cfg config) (*results, error) {
	res := &results{cfg: cfg}
	if cfg.has('a') {
		a, err := runContention(cfg.contention)
		if err != nil {
			return nil, fmt.Errorf("scenario a: %w", err)
		}
		res.a = a
	}
	var err error
	if cfg.has('b') || cfg.has('e') {
		if res.outage, err = runOutages(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.has('e') {
		if res.phases, err = runBreakerPhases(cfg.outage); err != nil {
			return nil, err
		}
	}
	if cfg.has('c') {
		if res.c, err = runSweep(cfg.failures); err != nil {
			return nil, err
		}
	}
	if cfg.has('f') {
		if res.f, err = runBlips(cfg.blip); err != nil {
			return nil, err
		}
	}
	if cfg.has('g') {
		if res.g, err = runTails(cfg.tail, cfg.outage); err != nil {
			return nil, err
		}
	}
	if cfg.has('d') {
		for _, nested := range []bool{false, true} {
			d, err := runNested(cfg.nested, nested)
			if err != nil {
				return nil, fmt.Errorf("scenario d: %w", err)
			}
			res.d = append(res.d, d)
		}
	}
	if cfg.has('h') {
		if res.h, err = runMetastables(cfg.metastable); err != nil {
			return nil, err
		}
	}
	if cfg.has('i') {
		if res.i, err = runLimiteds(cfg.limited); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// write writes the charts, results.md and the doc's blocks, and returns
// the files written.
func write(res *results) ([]string, error) {
	cfg := res.cfg
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return nil, err
	}
	var files []string
	add := func(name string, w, h vg.Length, f figure, err error) error {
		if err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		fs, err := save(cfg.out, name, w, h, f)
		files = append(files, fs...)
		return err
	}
	if res.a != nil {
		f, err := contentionFigure(res.a)
		if err := add("a-contention", chartW, chartH, f, err); err != nil {
			return files, err
		}
	}
	if res.byName(tokenBucket) != nil {
		p, err := timeline("Downstream load, outage at 200 calls/s", []*outageRun{res.byName(noBudget), res.byName(tokenBucket), res.byName(ratio)}, []int{0, 1, 2})
		if err := add("b-outage", chartW, chartH, single(p), err); err != nil {
			return files, err
		}
	}
	if res.c != nil {
		f, err := failuresFigure(res.c, cfg.failures)
		if err := add("c-random-failures", chartW, chartH, f, err); err != nil {
			return files, err
		}
	}
	if res.d != nil {
		f, err := nestedFigure(res.d, cfg.nested)
		if err := add("d-nested", chartW*3/4, chartH, f, err); err != nil {
			return files, err
		}
	}
	if g := res.byName(breaker); g != nil {
		p, err := timeline("Downstream load, outage at 200 calls/s, circuit breaker", []*outageRun{res.byName(noBudget), g}, []int{0, 3})
		if err := add("e-breaker", chartW, chartH, single(p), err); err != nil {
			return files, err
		}
	}
	if res.f != nil {
		p, err := timeline(fmt.Sprintf("Downstream load, a 1 s blip at %.0f calls/s", cfg.blip.rate), res.f, []int{0, 1, 2})
		if err := add("f-blip", chartW, chartH, single(p), err); err != nil {
			return files, err
		}
	}
	if res.g != nil {
		f, err := tailFigure(res.g)
		if err := add("g-tail", chartW, chartH, f, err); err != nil {
			return files, err
		}
	}
	if res.h != nil {
		f, err := metastableFigure(res.h)
		if err := add("h-metastable", chartW, chartH*3/2, f, err); err != nil {
			return files, err
		}
	}
	if res.i != nil {
		f, err := limitedFigure(res.i)
		if err := add("i-rate-limit", chartW, chartH*5/2, f, err); err != nil {
			return files, err
		}
	}
	md := filepath.Join(cfg.out, "results.md")
	if err := os.WriteFile(md, []byte(res.markdown()), 0o644); err != nil {
		return files, err
	}
	files = append(files, md)
	if cfg.doc != "" {
		if err := rewriteDoc(cfg.doc, res.sections()); err != nil {
			return files, err
		}
		files = append(files, cfg.doc)
	}
	return files, nil
}

// rewriteDoc replaces the body of each section's block in the Markdown
// file doc. Every section must have its block.
func rewriteDoc(doc string, sections []section) error {
	data, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	text := string(data)
	for _, s := range sections {
		begin, end := "<!-- retrysim:"+s.key+" -->\n", "<!-- /retrysim:"+s.key+" -->"
		i := strings.Index(text, begin)
		j := strings.Index(text, end)
		if i < 0 || j < i {
			return fmt.Errorf("%s: no block %q ... %q for scenario %s", doc, strings.TrimSpace(begin), end, s.key)
		}
		text = text[:i+len(begin)] + s.body() + text[j:]
	}
	return os.WriteFile(doc, []byte(text), 0o644)
}

// summary prints what the scenarios measured and the files written, and
// returns how many bounds were not met.
func summary(w io.Writer, res *results, files []string, took time.Duration) int {
	fmt.Fprintf(w, "retrysim %s: %s (wall time)\n", res.cfg.commandLine(), took.Round(10*time.Millisecond))
	failed := 0
	for _, c := range res.checks() {
		fmt.Fprintf(w, "  %s  %-9s %s: %s\n", c.scenario, "["+c.label()+"]", c.bound, c.measured)
		if !c.ok && c.skipped == "" {
			failed++
		}
	}
	fmt.Fprintf(w, "wrote %s\n", strings.Join(files, ", "))
	return failed
}
