package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/pgstore/pgschema"
)

// Store is an [idempotency.Store] on a PostgreSQL table. Build it with
// [New] (the zero value is not usable); create its table with
// [Store.Migrate]. It is safe for concurrent use, and stores in other
// processes that share the table coordinate through it. Closing the pool
// is the caller's job.
type Store struct {
	pool  *pgxpool.Pool
	clock clock.Clock // nil: the server's now()
	table pgschema.Table
	name  string // table, quoted for SQL
	q     queries
}

var _ idempotency.Store = (*Store)(nil)

// New returns a Store that keeps its records in pool's database, which
// it does not touch. pool must not be nil; a nil opts gives the defaults.
// An invalid option gives an error wrapping [retry.ErrInvalidOption]
// that names the problem.
func New(pool *pgxpool.Pool, opts *Options) (*Store, error) {
	if pool == nil {
		return nil, invalid("the pool is nil; build one with pgxpool.New")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	name := o.Table
	if name == "" {
		name = DefaultTable
	}
	table, err := pgschema.ParseTable(name)
	if err != nil {
		return nil, invalid("Options.Table %q: %v", name, err)
	}
	if o.Clock != nil && isNilPointer(o.Clock) {
		return nil, invalid("Options.Clock (%T)(nil) is a nil pointer, which cannot tell the time (leave Clock nil for the server's clock)", o.Clock)
	}
	quoted := table.Quoted()
	return &Store{pool: pool, clock: o.Clock, table: table, name: quoted, q: buildQueries(quoted)}, nil
}

// Table returns the quoted, possibly schema-qualified name of the store's
// table, as used in its SQL.
func (s *Store) Table() string { return s.name }

// Claim claims key for lease when the key is free, and otherwise reports
// who holds it or the stored outcome; see [idempotency.Store]. lease
// must be positive.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (idempotency.Claim, error) {
	if lease <= 0 {
		return idempotency.Claim{}, fmt.Errorf("%w: pgstore: claim: the lease is %v; it must be positive", retry.ErrInvalidOption, lease)
	}
	now, until := s.times(lease)
	k := any([]byte(key)) // boxed once: both statements send it
	var token string
	for range maxClaimReads {
		c, live, err := s.read(ctx, k, now)
		switch {
		case err != nil:
			return idempotency.Claim{}, fmt.Errorf("pgstore: claim: %w", err)
		case live:
			return c, nil
		}
		if token == "" {
			if token, err = newToken(); err != nil {
				return idempotency.Claim{}, fmt.Errorf("pgstore: claim: %w", err)
			}
		}
		tag, err := s.pool.Exec(ctx, s.q.claim, k, []byte(fingerprint), token, interval(lease), now, until)
		if err != nil {
			return idempotency.Claim{}, fmt.Errorf("pgstore: claim: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return idempotency.Claim{Status: idempotency.ClaimAcquired, Token: token, Fingerprint: fingerprint}, nil
		}
		// Another caller claimed the row after the read: read it again.
		if err := ctx.Err(); err != nil {
			return idempotency.Claim{}, fmt.Errorf("pgstore: claim: %w", err)
		}
	}
	return idempotency.Claim{}, fmt.Errorf("pgstore: claim: the row changed under %d reads in a row; try again", maxClaimReads)
}

// maxClaimReads bounds Claim's rounds of a read and an insert. An insert
// that takes nothing found a live row, which the next read sees unless it
// was deleted or expired meanwhile, so more than a few mean something is
// deeply wrong.
const maxClaimReads = 8

// Renew extends the lease held under token to lease from now, also one
// that expired but was not taken over. It returns an error matching
// [idempotency.ErrLeaseLost] when token no longer holds key (taken over,
// completed, released, or deleted by [Store.Cleanup]). lease must be
// positive.
func (s *Store) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("%w: pgstore: renew: the lease is %v; it must be positive", retry.ErrInvalidOption, lease)
	}
	_, until := s.times(lease)
	return s.fenced(ctx, "renew", s.q.renew, []byte(key), token, interval(lease), until)
}

// Complete stores rec as key's outcome for retention (0: it expires at
// once; negative is refused) and ends the lease. It returns an error
// matching [idempotency.ErrLeaseLost], storing nothing, when token no longer
// holds key. The package doc says how rec.Error's bytes are stored.
func (s *Store) Complete(ctx context.Context, key, token string, rec idempotency.StoredOutcome, retention time.Duration) error {
	if retention < 0 {
		return fmt.Errorf("%w: pgstore: complete: the retention is %v; it must not be negative", retry.ErrInvalidOption, retention)
	}
	_, until := s.times(retention)
	return s.fenced(ctx, "complete", s.q.complete, []byte(key), token, interval(retention), until, rec.Permanent, rec.Value, pgschema.Text(rec.Error))
}

// Release deletes the claim held under token, so that the next Claim
// acquires key at once. When token no longer holds key it changes nothing
// and returns nil.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if _, err := s.pool.Exec(ctx, s.q.release, []byte(key), token); err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	return nil
}

// fenced runs an UPDATE that matches the row only under its token, and
// turns "no row changed" into ErrLeaseLost.
func (s *Store) fenced(ctx context.Context, op, sql string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: %s: %w", op, idempotency.ErrLeaseLost)
	}
	return nil
}

// times returns the instants the statements compare with and store, on
// the injected clock; both are nil without one, and the SQL uses now().
// Expiries are rounded up to the microsecond PostgreSQL keeps, so a lease
// is never cut short, and capped at [maxExpiry]; the current time is
// rounded down.
func (s *Store) times(d time.Duration) (now, until *time.Time) {
	if s.clock == nil {
		return nil, nil
	}
	n := s.clock.Now()
	u := n.Add(d) // saturates rather than wrapping
	if t := u.Truncate(time.Microsecond); t.Before(u) {
		u = t.Add(time.Microsecond)
	}
	if u.After(maxExpiry) {
		u = maxExpiry
	}
	n = n.Truncate(time.Microsecond)
	return &n, &u
}

// maxExpiry is the latest instant a timestamptz holds. An expiry on the
// server's clock never comes near it: the longest Duration,
// math.MaxInt64 (about 292 years), ends in the 24th century. An injected
// clock set beyond the year 294000 could pass it, and is capped.
var maxExpiry = time.Date(294276, time.December, 31, 23, 59, 59, 999999000, time.UTC)

// interval is d as a PostgreSQL interval of whole microseconds, rounded
// up. It is exact: the microseconds are an int64, never a float, and d's
// largest value, math.MaxInt64, is 9223372036854776 of them, which
// neither Go nor PostgreSQL overflows.
func interval(d time.Duration) pgtype.Interval {
	us := d / time.Microsecond // no d + 999ns: that wraps for d near math.MaxInt64
	if d%time.Microsecond > 0 {
		us++
	}
	return pgtype.Interval{Microseconds: int64(us), Valid: true}
}

// newToken returns 128 random bits in hex: unguessable and unique across
// processes without coordination.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// queries are the store's statements, built once with the quoted table
// name; every value travels as a parameter.
type queries struct {
	read, claim, renew, complete, release, cleanup string
}

// Parameters shared by the statements: $1 key, $2 fingerprint or token
// (read: the current time), and, for the injected clock, the current
// time and the computed expiry (both NULL to use the server's now()).
func buildQueries(table string) queries {
	r := strings.NewReplacer("{{table}}", table)
	return queries{
		// read is a claim's first statement, and its only one for a
		// held or completed key: a plain read of a live row, which writes
		// and locks nothing. A free key (new or expired) is then taken by
		// claim, which inserts the row, or takes over an expired one, only
		// while it is still free: "no row" means another caller took it
		// after the read, and Claim reads again.
		read: r.Replace(`SELECT fingerprint, completed, permanent, value, error FROM {{table}}
WHERE key = $1 AND expires_at > coalesce($2::timestamptz, now())`),
		claim: r.Replace(`INSERT INTO {{table}} AS t (key, fingerprint, token, completed, expires_at)
VALUES ($1, $2, $3, false, coalesce($6::timestamptz, now() + $4::interval))
ON CONFLICT (key) DO UPDATE
SET fingerprint = excluded.fingerprint, token = excluded.token, completed = false,
	expires_at = excluded.expires_at, permanent = false, value = NULL, error = NULL
WHERE t.expires_at <= coalesce($5::timestamptz, now())`),
		renew: r.Replace(`UPDATE {{table}}
SET expires_at = coalesce($4::timestamptz, now() + $3::interval)
WHERE key = $1 AND token = $2 AND NOT completed`),
		complete: r.Replace(`UPDATE {{table}}
SET completed = true, token = NULL,
	expires_at = coalesce($4::timestamptz, now() + $3::interval),
	permanent = $5, value = $6, error = $7
WHERE key = $1 AND token = $2 AND NOT completed`),
		release: r.Replace(`DELETE FROM {{table}} WHERE key = $1 AND token = $2 AND NOT completed`),
		cleanup: r.Replace(`DELETE FROM {{table}} WHERE key IN (
	SELECT key FROM {{table}}
	WHERE expires_at <= coalesce($1::timestamptz, now())
	ORDER BY expires_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)`),
	}
}
