package retryprom_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics"
	"github.com/steadfast-go/retry/retryprom"
)

// outcomeList finds the list of outcomes in a document: what follows
// "outcome is one of" (or "outcome` is one of", "outcome label is one of")
// up to a period or a parenthesis.
var outcomeList = regexp.MustCompile("outcome`?(?: label)? is (?:one of )?([^.(]*)")

// refusedByList finds the sentence of a document that names the
// refused_by values, up to the semicolon after it.
var refusedByList = regexp.MustCompile("A refused call also counts in ([^;]*)")

// docText returns the text of a README or of a Go file's comments, with
// comment markers and line breaks gone.
func docText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "//", " ")), " ")
}

// TestDocs: the README and the package doc give the number of series an
// operation has, every outcome label and every refused_by label, as the
// Observer makes them; every refuser the overload package names has its
// series.
func TestDocs(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := retryprom.New(reg, retryprom.Options{})
	require.NoError(t, err)
	obs.OnDone(t.Context(), retry.Done{Name: "op", Outcome: retry.OutcomeSuccess, Attempts: 1})
	families, err := reg.Gather()
	require.NoError(t, err)
	perOp := 0
	var refusedBy []string
	for _, f := range families {
		if f.GetName() == "retry_refusals_total" {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "refused_by" {
						refusedBy = append(refusedBy, l.GetValue())
					}
				}
			}
		}
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				perOp += len(h.GetBucket()) + 3 // and le="+Inf", _sum, _count
			} else {
				perOp++
			}
		}
	}
	require.Equal(t, 48, perOp)
	var labels []string
	for r := overload.RefusedByBudget; r.String() != ""; r++ {
		labels = append(labels, r.String())
	}
	assert.ElementsMatch(t, labels, refusedBy, "a series per refuser")
	for _, doc := range []string{"README.md", "retryprom.go"} {
		text := docText(t, doc)
		assert.Contains(t, text, fmt.Sprintf("has %d series", perOp), doc)
		assert.Contains(t, text, fmt.Sprintf(": %d by default", perOp*(retryprom.DefaultMaxOperations+1)), doc)
		list := outcomeList.FindStringSubmatch(text)
		require.NotNil(t, list, "%s lists no outcomes", doc)
		for _, oc := range retrymetrics.OutcomeLabels(retry.OutcomeHandedOff) {
			assert.Regexp(t, "\\b"+regexp.QuoteMeta(oc)+"\\b", list[1], "%s: the outcomes", doc)
		}
		list = refusedByList.FindStringSubmatch(text)
		require.NotNil(t, list, "%s lists no refused_by values", doc)
		for _, by := range labels {
			assert.Regexp(t, "\\b"+by+"\\b", list[1], "%s: the refused_by values", doc)
		}
	}
}
