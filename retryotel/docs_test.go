package retryotel_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrymetrics"
)

// TestDocs: the README and the package doc list every retry.outcome
// value: what follows "retry.outcome is (one of)" up to a period or a
// parenthesis.
func TestDocs(t *testing.T) {
	t.Parallel()
	outcomeList := regexp.MustCompile("retry\\.outcome`? is (?:one of )?([^.(]*)")
	for _, doc := range []string{"README.md", "retryotel.go"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "//", " ")), " ")
		list := outcomeList.FindStringSubmatch(text)
		require.NotNil(t, list, "%s lists no outcomes", doc)
		for _, oc := range retrymetrics.OutcomeLabels(retry.OutcomeHandedOff) {
			assert.Regexp(t, "\\b"+regexp.QuoteMeta(oc)+"\\b", list[1], "%s: the outcomes", doc)
		}
	}
}
