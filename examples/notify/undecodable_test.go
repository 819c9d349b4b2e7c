package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
)

// One row of the dead-letter table that this version cannot decode (a
// reason written by a newer version) does not stop the example from
// starting: the other records still say when an earlier run ended.
func TestUndecodableDeadLetterRowDoesNotStopTheRun(t *testing.T) {
	url, ns := testPostgres(t)
	cfg := testConfig(t, "-seed", "7", "-postgres", url, "-namespace", ns)
	pool := pgdltest.Pool(t)
	table := ns + "_dead_letters"
	sink, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: table})
	require.NoError(t, err)
	require.NoError(t, sink.Migrate(t.Context()))
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: deadletter.NewID(), Name: "promo", Attempts: 1,
		GaveUp: time.Now().Add(time.Hour), Reason: retry.OutcomeExhausted}))
	_, err = pool.Exec(t.Context(), "UPDATE "+pgx.Identifier{table}.Sanitize()+" SET reason = 'shed'")
	require.NoError(t, err)
	var out syncBuffer
	_, err = run(context.WithoutCancel(t.Context()), cfg, env{stdout: &out, log: discard{}})
	require.NoError(t, err, "a row this version cannot decode does not stop the run")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
