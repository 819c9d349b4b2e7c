// Package pgstore is a PostgreSQL [idempotency.Store], built on
// github.com/jackc/pgx/v5/pgxpool, for idempotent calls shared by many
// goroutines and processes.
//
// Each idempotency key is one row, keyed by the key. A claim reads the
// row; when it is free (new, lease expired, or retention expired) an
// INSERT … ON CONFLICT DO UPDATE takes it only if it is still free, so
// deciding who runs the work is atomic in the database. Each claim
// gets a random fencing token; Renew, Complete and Release change the row
// only while that token still holds it.
//
// Leases and retention are measured on the server's clock (now()) unless
// [Options.Clock] injects one. Expired rows are claimable at once;
// [Store.Cleanup] deletes them. Any positive time.Duration is a
// valid lease or retention, math.MaxInt64 (the usual "forever", about 292
// years) too: it is added to the time exactly, in whole microseconds
// rounded up, and PostgreSQL's timestamps reach the year 294276. An
// expiry past that instant, possible only on an injected clock set
// beyond it, is capped at PostgreSQL's latest timestamp.
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	...
//	store, err := pgstore.New(pool, &pgstore.Options{Table: "billing_idempotency"})
//	...
//	if err := store.Migrate(ctx); err != nil { ... }
//
// Table names follow one rule, shared with pgdeadletter and kept in the
// package [github.com/steadfast-go/retry/pgstore/pgschema]: "table" or
// "schema.table", each part a lower-case unquoted SQL identifier (a
// lower-case letter or underscore, then lower-case letters, digits or
// underscores) that is not a reserved key word of PostgreSQL ("user",
// "select", "order"…: psql reads those as something else unless quoted),
// at most 48 bytes for the table and 63 for the schema. Other names are
// refused with an error wrapping [retry.ErrInvalidOption]. [New] takes
// its settings as an [*Options], whose fields document their defaults; a
// nil *Options gives them all.
//
// rec.Error of [Store.Complete] is stored in a text column, which cannot
// hold invalid UTF-8 or NUL bytes: such bytes are stored, and replayed,
// as U+FFFD ([pgschema.Text], as pgdeadletter stores text) rather than
// losing the outcome. rec.Value, bytea, is stored as it is.
//
// # Migrating
//
// [Store.Migrate] creates the table and its expiry index when they do not
// exist; [Store.Schema] gives the same DDL to migration tools. Processes
// that start together may all call Migrate: a transaction-scoped advisory
// lock on the table runs them one at a time, since concurrent CREATE … IF
// NOT EXISTS can fail in PostgreSQL (see [pgschema.Migrate]). The lock is
// the same for every spelling of the table: a name without a schema is
// resolved to current_schema() first, so stores configured with "t" and
// "public.t" wait for each other. A named schema must exist already.
//
// # Cost
//
// Renew, Complete and Release are one statement each, atomic in the
// database. Claim of a held or completed key is one plain read, which
// writes and locks nothing: a replay costs what a hand-written SELECT
// does. A free key adds the insert, and a caller that lost the race for
// it reads once more. A [Store] starts no goroutine and keeps no
// state besides the pool.
//
// Expired rows are free to claim, so deleting them changes no outcome; it
// only keeps the table and its indexes small. The store never deletes
// them by itself: call [Store.Cleanup] from a periodic job (every few
// minutes is plenty). It deletes in batches of 1000 rows, so a backlog
// never holds many row locks or a long transaction, skipping rows locked
// by running claims, until none is left or ctx is done; any number of
// processes may run it at once. BENCHMARKS.md has the figures.
package pgstore
