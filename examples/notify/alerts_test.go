package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite alerts/notify.tests.yml from the runs")

const (
	rulesFile = "../../retryprom/alerts/retry.rules.yml" // from this package's directory
	testsFile = "alerts/notify.tests.yml"
)

// alertScenarios are the runs whose metrics the alert tests replay: the
// default failure rate, and a bad day.
var alertScenarios = []struct {
	name string
	args []string
}{
	{"the defaults: 30 % of attempts fail", []string{"-jobs", "600"}},
	// Without the budget: it would refuse retries in an order that depends on
	// the workers, and the series must be the same at every run.
	{"a bad day: 60 % of attempts fail", []string{"-jobs", "600", "-fail-rate", "0.6", "-no-budget"}},
}

// TestAlertRules: the alerts shipped in retryprom fire, and stay quiet,
// on the series the example produces. alerts/notify.tests.yml holds the
// counters of each scenario's run as a promtool unit test, with the alerts
// those rates must raise; this test checks that the file is what the runs
// produce (go test -run TestAlertRules -update rewrites it), then has
// promtool run it.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	rules := readAlertAnnotations(t)
	var b strings.Builder
	b.WriteString(`# The alerts of retryprom on the series of examples/notify: promtool test
# rules notify.tests.yml, run by TestAlertRules, which also checks that this
# file is what the runs produce (go test -run TestAlertRules -update
# rewrites it). Each scenario's counters are retryprom's after one run of
# the example, as if it ran every 8 seconds for 90 minutes: 7.5 runs a
# minute, so that every rate is a multiple of 1/8 a second and the sums
# are exact (as in retryprom's own tests).
rule_files:
  - ../../../retryprom/alerts/retry.rules.yml
evaluation_interval: 1m

tests:
`)
	for _, sc := range alertScenarios {
		reg := prometheus.NewRegistry()
		runIn(t, testConfig(t, sc.args...), env{registry: reg})
		writeScenario(t, &b, "go run ./examples/notify "+strings.Join(sc.args, " ")+": "+sc.name, gatherOps(t, reg), rules)
	}
	got := b.String()
	if *update {
		require.NoError(t, os.WriteFile(testsFile, []byte(got), 0o644))
	}
	want, err := os.ReadFile(testsFile)
	require.NoError(t, err)
	require.Equal(t, string(want), got, "%s is not what the example produces: go test -run TestAlertRules -update", testsFile)

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found; .ci/run installs it with the Debian package prometheus")
		}
		t.Skip("promtool not found: apt-get install prometheus (Debian), then go test ./... in examples/notify")
	}
	cmd := exec.CommandContext(t.Context(), promtool, "test", "rules", filepath.Base(testsFile))
	cmd.Dir = filepath.Dir(testsFile)
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "promtool test rules:\n%s", out)
}

// opCounters are retryprom's counters of one operation.
type opCounters struct {
	calls       map[string]float64 // by outcome
	retries     float64
	deadLetters map[string]float64 // by result
}

func gatherOps(t *testing.T, reg *prometheus.Registry) map[string]*opCounters {
	families, err := reg.Gather()
	require.NoError(t, err)
	ops := map[string]*opCounters{}
	op := func(name string) *opCounters {
		if ops[name] == nil {
			ops[name] = &opCounters{calls: map[string]float64{}, deadLetters: map[string]float64{}}
		}
		return ops[name]
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			switch f.GetName() {
			case "retry_calls_total":
				op(l["operation"]).calls[l["outcome"]] = m.GetCounter().GetValue()
			case "retry_retries_total":
				op(l["operation"]).retries = m.GetCounter().GetValue()
			case "retry_dead_letters_total":
				op(l["operation"]).deadLetters[l["result"]] = m.GetCounter().GetValue()
			}
		}
	}
	require.Len(t, ops, len(jobTypes))
	return ops
}

// runsPerMinute is how often the series repeat a run's counts.
const runsPerMinute = 7.5

// writeScenario writes one promtool test: the counters, growing by
// runsPerMinute runs' worth a minute, and the alerts expected at 80 minutes, computed
// from those rates as the rules do.
func writeScenario(t *testing.T, b *strings.Builder, title string, ops map[string]*opCounters, rules map[string]map[string]string) {
	fmt.Fprintf(b, "  # %s\n  - interval: 1m\n    input_series:\n", title)
	names := slices.Sorted(maps.Keys(ops))
	series := func(metric, labels string, v float64) {
		fmt.Fprintf(b, "      - series: '%s{job=\"notify\",%s}'\n        values: '0+%gx90'\n", metric, labels, v*runsPerMinute)
	}
	expected := map[string][]string{}
	for _, name := range names {
		c := ops[name]
		var calls, failed float64
		for _, outcome := range slices.Sorted(maps.Keys(c.calls)) {
			v := c.calls[outcome]
			calls += v
			switch outcome {
			case "permanent", "exhausted", "max-elapsed", "deadline", "refused": // as the rule counts failures
				failed += v
			}
			if v > 0 {
				series("retry_calls_total", fmt.Sprintf("operation=%q,outcome=%q", name, outcome), v)
			}
		}
		series("retry_retries_total", fmt.Sprintf("operation=%q", name), c.retries)
		for _, result := range slices.Sorted(maps.Keys(c.deadLetters)) {
			series("retry_dead_letters_total", fmt.Sprintf("operation=%q,result=%q", name, result), c.deadLetters[result])
		}
		labels := map[string]string{"job": "notify", "operation": name}
		fire := func(alert string, value float64, severity string) {
			expected[alert] = append(expected[alert], expAlert(t, rules[alert], labels, value, severity))
		}
		if ratio := failed / calls; ratio > 0.10 {
			fire("RetryHighFailureRate", ratio, "critical")
		}
		if perCall := c.retries / calls; perCall > 1 {
			fire("RetryStorm", perCall, "warning")
		}
		if perHour := 60 * runsPerMinute * (c.deadLetters["recorded"] + c.deadLetters["failed"]); perHour > 10 {
			fire("RetryDeadLettersPilingUp", perHour, "warning")
		}
		if c.deadLetters["failed"] > 0 {
			fire("RetryDeadLetterNotRecorded", 5*runsPerMinute*c.deadLetters["failed"], "critical")
		}
	}
	b.WriteString("    alert_rule_test:\n")
	for _, alert := range []string{"RetryHighFailureRate", "RetryStorm", "RetryDeadLettersPilingUp", "RetryDeadLetterNotRecorded"} {
		fmt.Fprintf(b, "      - eval_time: 80m\n        alertname: %s\n", alert)
		if len(expected[alert]) == 0 {
			b.WriteString("        exp_alerts: []\n")
			continue
		}
		b.WriteString("        exp_alerts:\n")
		for _, a := range expected[alert] {
			b.WriteString(a)
		}
	}
	b.WriteString("\n")
}

// expAlert renders one expected alert, its annotations made from the
// rules' own templates as Prometheus makes them.
func expAlert(t *testing.T, annotations, labels map[string]string, value float64, severity string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "          - exp_labels:\n              severity: %s\n              job: %s\n              operation: %s\n            exp_annotations:\n",
		severity, labels["job"], labels["operation"])
	for _, key := range slices.Sorted(maps.Keys(annotations)) {
		tmpl, err := template.New(key).Funcs(template.FuncMap{
			"humanizePercentage": func(v float64) string { return fmt.Sprintf("%.4g%%", v*100) },
		}).Parse("{{$labels := .Labels}}{{$value := .Value}}" + annotations[key])
		require.NoError(t, err)
		var text bytes.Buffer
		require.NoError(t, tmpl.Execute(&text, struct {
			Labels map[string]string
			Value  float64
		}{labels, value}))
		fmt.Fprintf(&b, "              %s: '%s'\n", key, strings.ReplaceAll(text.String(), "'", "''"))
	}
	return b.String()
}

// readAlertAnnotations returns the annotation templates of each alert of
// the shipped rules.
func readAlertAnnotations(t *testing.T) map[string]map[string]string {
	data, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(data, &f))
	out := map[string]map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r.Annotations
			}
		}
	}
	require.Len(t, out, 4)
	return out
}
