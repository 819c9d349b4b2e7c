package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

// TestRedriveHintMatchesTheReasons: the closing hint redrives the
// reasons of this run's dead letters that may be sent again as they are
// (exhausted, deadline, refused), and no redrive at all when every dead
// letter is unknown or permanent, which it names instead.
func TestRedriveHintMatchesTheReasons(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       summary
		reasons string // the redrive's -reason; "": no redrive printed
		notes   []string
	}{
		{"every dead letter unknown", summary{DeadLettered: 4, Unknown: 4}, "",
			[]string{"The 4 unknown ones may have been pushed"}},
		{"every dead letter permanent", summary{DeadLettered: 2, Permanent: 2}, "",
			[]string{"The 2 permanent ones (empty message, invalid user) fail again"}},
		{"exhausted among the others", summary{DeadLettered: 6, Exhausted: 3, Permanent: 2, Unknown: 1}, "exhausted",
			[]string{"Redrive sends each exhausted job again", "The 2 permanent ones", "The 1 unknown ones"}},
		{"deadline and refused", summary{DeadLettered: 5, Deadline: 2, Refused: 3}, "deadline,refused",
			[]string{"Redrive sends each deadline, refused job again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			printCommands(&out, config{namespace: "notify"}, &backends{sinkName: "file", where: "-file dead.jsonl"},
				time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC), tc.s)
			text := out.String()
			for _, note := range tc.notes {
				assert.Contains(t, text, note)
			}
			if tc.reasons == "" {
				assert.NotContains(t, text, "deadletters redrive", text)
				assert.NotContains(t, text, "Redrive sends", text)
				return
			}
			words := commandLine(t, text, "  go run ./cmd/deadletters redrive ")
			i := slices.Index(words, "-reason")
			require.Positive(t, i, text)
			assert.Equal(t, tc.reasons, words[i+1])
			for r := range strings.SplitSeq(words[i+1], ",") {
				var o retry.Outcome
				require.NoError(t, o.UnmarshalText([]byte(r)), "deadletters -reason reads %q", r)
			}
		})
	}
}
