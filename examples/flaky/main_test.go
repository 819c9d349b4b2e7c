package main

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		require.NoError(t, run(t.Context(), &out, rand.NewPCG(1, 2), filepath.Join(t.TempDir(), "dl.jsonl")))
		got := out.String()
		for _, want := range []string{
			"=> success, attempts: 3",
			"waiting 250ms",
			"=> permanent, attempts: 1",
			"error: retry: attempts exhausted after 3 attempts: call 3: 503 service unavailable",
			"errors.Is(err, retry.ErrExhausted): true | errors.Is(err, errUnavailable): true",
			"=> deadline, attempts: 1",
			"error: retry: next wait would end past the context deadline after 1 attempt: 503 service unavailable",
			"returned after 0s, not at the 300ms deadline",
			`dead letter: name=send-invoice reason=exhausted attempts=3 payload={"invoice":42} last error="503 service unavailable"`,
			`replaying send-invoice with payload {"invoice":42}`,
			"redrive: 1 pending, 1 succeeded",
			"a second redrive finds 0 pending",
		} {
			assert.Contains(t, got, want)
		}
	})
}
