package retryprom_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryprom"
)

// TestAlertRules runs promtool's unit tests of alerts/retry.rules.yml.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found; .ci/run installs it with the Debian package prometheus")
		}
		t.Skip("promtool not found: apt-get install prometheus (Debian), then go test ./... in retryprom")
	}
	for _, args := range [][]string{
		{"check", "rules", "retry.rules.yml"},
		{"test", "rules", "retry.tests.yml"},
	} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = "alerts"
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "promtool %v:\n%s", args, out)
	}
}

// TestAlertRules_useExportedMetrics checks that every metric the rules
// read is one the Observer exports, so a rename cannot break the alerts
// unnoticed.
func TestAlertRules_useExportedMetrics(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile("alerts/retry.rules.yml")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	obs, err := retryprom.New(reg, retryprom.Options{})
	require.NoError(t, err)
	obs.OnDone(t.Context(), retry.Done{Name: "op", Outcome: retry.OutcomeSuccess, Attempts: 1})
	families, err := reg.Gather()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
	}
	// Metric names not preceded by ":" (recorded series have colons).
	used := regexp.MustCompile(`(?:^|[^:\w])(retry_[a-z_]+)`).FindAllStringSubmatch(string(rules), -1)
	require.NotEmpty(t, used)
	for _, m := range used {
		assert.True(t, exported[m[1]], "the rules read %s, which retryprom does not export", m[1])
	}
}
