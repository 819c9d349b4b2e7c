package main

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		require.NoError(t, run(t.Context(), &out, rand.NewPCG(1, 2)))
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
		} {
			assert.Contains(t, got, want)
		}
	})
}
