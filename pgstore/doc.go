// Package pgstore is a PostgreSQL [retry.IdempotencyStore], built on
// github.com/jackc/pgx/v5/pgxpool, for idempotent calls shared by many
// goroutines and processes.
//
// Each idempotency key is one row, keyed by the key. A claim is a single
// INSERT … ON CONFLICT DO UPDATE statement that takes the row only when it
// is free (new, lease expired, or retention expired) and otherwise reads
// it, so deciding who runs the work is atomic in the database. Each claim
// gets a random fencing token; Renew, Complete and Release change the row
// only while that token still holds it.
//
// Leases and retention are measured on the server's clock (now()) unless
// [Options.Clock] injects one. Expired rows are claimable at once; [Store.Cleanup]
// deletes them to keep the table small. Any positive time.Duration is a
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
package pgstore
