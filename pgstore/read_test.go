package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadInEveryExecMode replays outcomes through pools in each of pgx's
// exec modes: the cached statement (the default) sends bytea and bool in
// binary format, which the read decodes itself; the simple protocol and
// the exec mode send text, which it leaves to pgx's Scan. Both must give
// the same claims.
func TestReadInEveryExecMode(t *testing.T) {
	_, _, table := newStore(t, nil)
	outcomes := map[string]idempotency.StoredOutcome{
		"value":         {Value: []byte(`{"id":7}`)},
		"empty value":   {Value: []byte{}},
		"no value":      {},
		"binary value":  {Value: []byte{0, 1, 2, 0xff, '\\', 'x'}},
		"failure":       {Permanent: true, Error: "card declined"},
		"unknown":       {Permanent: true, Value: []byte("outcome-unknown"), Error: "timeout"},
		"unstorable":    {Permanent: true, Error: "bad\x00byte"},
		"utf-8 failure": {Permanent: true, Error: "carte refusée…"},
	}
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			pool := newPoolWith(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = mode })
			store, err := pgstore.New(pool, &pgstore.Options{Table: table})
			require.NoError(t, err)
			ctx := context.Background()
			for name, rec := range outcomes {
				key := mode.String() + "\x00" + name
				c, err := store.Claim(ctx, key, "fp\xff", time.Minute)
				require.NoError(t, err, name)
				require.Equal(t, idempotency.ClaimAcquired, c.Status, name)
				held, err := store.Claim(ctx, key, "other", time.Minute)
				require.NoError(t, err, name)
				assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: "fp\xff"}, held, name)

				require.NoError(t, store.Complete(ctx, key, c.Token, rec, time.Hour), name)
				if rec.Error == "bad\x00byte" {
					rec.Error = "bad\uFFFDbyte"
				}
				for range 2 { // twice: the second runs on a cached statement
					got, err := store.Claim(ctx, key, "other", time.Minute)
					require.NoError(t, err, name)
					assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: "fp\xff", Outcome: rec}, got, name)
				}
			}
		})
	}
}
