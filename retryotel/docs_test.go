package retryotel_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics"
	"github.com/steadfast-go/retry/retryotel"
)

// TestDocs: the README and the package doc list every retry.outcome
// value (what follows "retry.outcome is (one of)" up to a period or a
// parenthesis) and every retry.refused_by value (in the sentence "A
// refused call also counts in", up to its semicolon), and every refuser
// the overload package names has its retry.refusals series.
func TestDocs(t *testing.T) {
	t.Parallel()
	outcomeList := regexp.MustCompile("retry\\.outcome`? is (?:one of )?([^.(]*)")
	refusedByList := regexp.MustCompile("A refused call also counts in ([^;]*)")
	var refusers []string
	for r := overload.RefusedByBudget; r.String() != ""; r++ {
		refusers = append(refusers, r.String())
	}
	obs, collect := newObserver(t, retryotel.Options{})
	obs.OnDone(t.Context(), retry.Done{Name: "op", Outcome: retry.OutcomeSuccess, Attempts: 1})
	var series []string
	for _, p := range collect("retry.refusals").Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := p.Attributes.Value(retryotel.RefusedByKey)
		series = append(series, v.AsString())
	}
	assert.ElementsMatch(t, refusers, series, "a retry.refusals series per refuser")
	for _, doc := range []string{"README.md", "retryotel.go"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "//", " ")), " ")
		list := outcomeList.FindStringSubmatch(text)
		require.NotNil(t, list, "%s lists no outcomes", doc)
		for _, oc := range retrymetrics.OutcomeLabels(retry.OutcomeHandedOff) {
			assert.Regexp(t, "\\b"+regexp.QuoteMeta(oc)+"\\b", list[1], "%s: the outcomes", doc)
		}
		list = refusedByList.FindStringSubmatch(text)
		require.NotNil(t, list, "%s lists no retry.refused_by values", doc)
		for _, by := range refusers {
			assert.Regexp(t, "\\b"+by+"\\b", list[1], "%s: the retry.refused_by values", doc)
		}
	}
}
