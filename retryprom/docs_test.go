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
	"github.com/steadfast-go/retry/retrymetrics"
	"github.com/steadfast-go/retry/retryprom"
)

// outcomeList finds the list of outcomes in a document: what follows
// "outcome is one of" (or "outcome` is one of", "outcome label is one of")
// up to a period or a parenthesis.
var outcomeList = regexp.MustCompile("outcome`?(?: label)? is (?:one of )?([^.(]*)")

// docText returns the text of a README or of a Go file's comments, with
// comment markers and line breaks gone.
func docText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "//", " ")), " ")
}

// TestDocs: the README and the package doc give the number of series an
// operation has, and every outcome label, as the Observer makes them.
func TestDocs(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := retryprom.New(reg, retryprom.Options{})
	require.NoError(t, err)
	obs.OnDone(t.Context(), retry.Done{Name: "op", Outcome: retry.OutcomeSuccess, Attempts: 1})
	families, err := reg.Gather()
	require.NoError(t, err)
	perOp := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				perOp += len(h.GetBucket()) + 3 // and le="+Inf", _sum, _count
			} else {
				perOp++
			}
		}
	}
	require.Equal(t, 46, perOp)
	for _, doc := range []string{"README.md", "retryprom.go"} {
		text := docText(t, doc)
		assert.Contains(t, text, fmt.Sprintf("has %d series", perOp), doc)
		assert.Contains(t, text, fmt.Sprintf(": %d by default", perOp*(retryprom.DefaultMaxOperations+1)), doc)
		list := outcomeList.FindStringSubmatch(text)
		require.NotNil(t, list, "%s lists no outcomes", doc)
		for _, oc := range retrymetrics.OutcomeLabels(retry.OutcomeHandedOff) {
			assert.Regexp(t, "\\b"+regexp.QuoteMeta(oc)+"\\b", list[1], "%s: the outcomes", doc)
		}
	}
}
