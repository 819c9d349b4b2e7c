package pgdeadletter_test

import (
	"context"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/pgstore/pgschema"
	"github.com/steadfast-go/retry/pgstore/pgschema/pgschematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// record returns a complete dead letter, with times at PostgreSQL's
// precision so that it reads back equal.
func record(id, name string, reason retry.Outcome, gaveUp time.Time) retry.DeadLetter {
	gaveUp = gaveUp.UTC().Truncate(time.Microsecond)
	return retry.DeadLetter{
		ID:             id,
		Name:           name,
		IdempotencyKey: "key-" + id,
		Payload:        []byte(`{"order":"` + id + `"}`),
		Attempts:       3,
		FirstAttempt:   gaveUp.Add(-1500 * time.Millisecond),
		GaveUp:         gaveUp,
		Reason:         reason,
		LastError:      "connection refused",
		Errors: []retry.AttemptError{
			{Attempt: 1, Error: "timeout"},
			{Attempt: 3, Wait: 200 * time.Millisecond, Error: "connection refused"},
		},
	}
}

func TestPutGetRoundTrip(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	ctx := t.Context()
	want := record("a1", "charge-card", retry.OutcomeExhausted, time.Now())
	want.Redrives, want.RedriveOf = 2, "a0"
	want.Redriven = want.GaveUp.Add(time.Hour) // as when copied from another store
	// Every field is set, so a field added to DeadLetter and not stored
	// fails this test.
	v := reflect.ValueOf(want)
	for i := range v.NumField() {
		require.False(t, v.Field(i).IsZero(), "set DeadLetter.%s in this test, and store it", v.Type().Field(i).Name)
	}
	require.NoError(t, s.Put(ctx, want))

	got, err := s.Get(ctx, "a1")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Empty optional fields stay empty.
	bare := retry.DeadLetter{ID: "b1", GaveUp: want.GaveUp, Reason: retry.OutcomePermanent}
	require.NoError(t, s.Put(ctx, bare))
	got, err = s.Get(ctx, "b1")
	require.NoError(t, err)
	assert.Equal(t, bare, got)

	_, err = s.Get(ctx, "nope")
	assert.ErrorIs(t, err, pgdeadletter.ErrNotFound)
}

func TestPutIsIdempotentOnID(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	ctx := t.Context()
	first := record("x", "first", retry.OutcomeExhausted, time.Now())
	require.NoError(t, s.Put(ctx, first))
	again := first
	again.Name = "second"
	require.NoError(t, s.Put(ctx, again), "a repeated Put succeeds")

	all, err := s.List(ctx, deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, first, all[0], "the first record stored is kept")
}

func TestPutConcurrentSameID(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	dl := record("same", "op", retry.OutcomeExhausted, time.Now())
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Put(t.Context(), dl) })
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	all, err := s.List(t.Context(), deadletter.Filter{})
	require.NoError(t, err)
	assert.Len(t, all, 1)
}

func TestPutRejectsMissingID(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	err := s.Put(t.Context(), retry.DeadLetter{Name: "op"})
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
}

func TestPutHonoursContext(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Put(ctx, record("c", "op", retry.OutcomeExhausted, time.Now()))
	assert.ErrorIs(t, err, context.Canceled)
}

func TestNewValidatesTable(t *testing.T) {
	// New does not connect: nothing listens on port 1.
	pool, err := pgxpool.New(t.Context(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// The names pgstore's tests run too (pgschematest.TestTableNames in
	// pgschema's). Options.Table "" means DefaultTable, so the one name of
	// the rule's that cannot reach it here is the empty one, which gives
	// the default table instead.
	for _, name := range pgschematest.Valid() {
		_, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: name})
		assert.NoError(t, err, "table name %q", name)
	}
	for _, name := range pgschematest.Invalid() {
		s, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: name})
		if name == "" {
			require.NoError(t, err)
			assert.Equal(t, pgdeadletter.DefaultTable, s.Table())
			continue
		}
		assert.Nil(t, s, "table name %q", name)
		assert.ErrorIs(t, err, retry.ErrInvalidOption, "table name %q", name)
		assert.ErrorContains(t, err, "Options.Table", "table name %q", name)
	}
	_, err = pgdeadletter.New(pool, &pgdeadletter.Options{Table: "Dead_Letters"})
	assert.ErrorContains(t, err, `pgdeadletter: Options.Table "Dead_Letters": the table name must be a lower-case letter`)

	s, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: "app.dead_letters"})
	require.NoError(t, err)
	assert.Equal(t, "app.dead_letters", s.Table(), "as given")
	assert.Contains(t, s.Schema(), `CREATE TABLE IF NOT EXISTS "app"."dead_letters" (`)
	// The longest table name leaves room for every index name's suffix.
	long := strings.Repeat("t", pgschema.MaxTableName)
	s, err = pgdeadletter.New(pool, &pgdeadletter.Options{Table: long})
	require.NoError(t, err)
	indexes := regexp.MustCompile(`CREATE INDEX IF NOT EXISTS "([^"]+)"`).FindAllStringSubmatch(s.Schema(), -1)
	assert.Len(t, indexes, 4)
	for _, m := range indexes {
		assert.True(t, strings.HasPrefix(m[1], long), m[1])
		assert.LessOrEqual(t, len(m[1]), 63, m[1])
	}

	for _, opts := range []*pgdeadletter.Options{nil, {Table: "dead_letters"}} {
		s, err := pgdeadletter.New(nil, opts)
		assert.Nil(t, s)
		assert.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.ErrorContains(t, err, "pgdeadletter: the pool is nil")
	}
}

// TestNewWithNilOptions: a nil *Options and the zero Options both give
// the default table.
func TestNewWithNilOptions(t *testing.T) {
	// New does not connect: nothing listens on port 1.
	pool, err := pgxpool.New(t.Context(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	for name, opts := range map[string]*pgdeadletter.Options{"nil": nil, "zero": {}} {
		s, err := pgdeadletter.New(pool, opts)
		require.NoError(t, err, name)
		assert.Equal(t, "retry_dead_letters", s.Table(), name)
		assert.Equal(t, pgdeadletter.DefaultTable, s.Table(), name)
		assert.Contains(t, s.Schema(), `CREATE TABLE IF NOT EXISTS "retry_dead_letters" (`, name)
		if opts != nil {
			assert.Equal(t, pgdeadletter.Options{}, *opts, "New fills in no default")
		}
	}
	// The caller's Options are read, not kept or changed.
	opts := &pgdeadletter.Options{Table: "a"}
	s, err := pgdeadletter.New(pool, opts)
	require.NoError(t, err)
	assert.Equal(t, pgdeadletter.Options{Table: "a"}, *opts, "New does not change the Options")
	opts.Table = "b"
	assert.Equal(t, "a", s.Table())
	assert.Contains(t, s.Schema(), `CREATE TABLE IF NOT EXISTS "a" (`)
}

func TestTableInNamedSchema(t *testing.T) {
	pool := pgdltest.Pool(t)
	name := "public." + pgdltest.Table(t, pool)
	s, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: name})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	require.NoError(t, s.Put(t.Context(), record("p", "op", retry.OutcomeExhausted, time.Now())))
	_, err = s.Get(t.Context(), "p")
	assert.NoError(t, err)
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	pool := pgdltest.Pool(t)
	table := pgdltest.Table(t, pool)
	s, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: table})
	require.NoError(t, err)
	assert.Equal(t, table, s.Table())
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Migrate(t.Context()) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, s.Put(t.Context(), record("m", "op", retry.OutcomeExhausted, time.Now())))
	require.NoError(t, s.Migrate(t.Context()), "again, on a table with rows")
	_, err = s.Get(t.Context(), "m")
	require.NoError(t, err, "Migrate keeps the rows")

	var indexes int
	require.NoError(t, pool.QueryRow(t.Context(),
		"SELECT count(*) FROM pg_indexes WHERE tablename = $1", table).Scan(&indexes))
	assert.Equal(t, 5, indexes, "primary key plus name, reason, gave_up and pending indexes")
}

func TestMissingTableIsAnError(t *testing.T) {
	pool := pgdltest.Pool(t)
	s, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: pgdltest.Table(t, pool)})
	require.NoError(t, err)
	err = s.Put(t.Context(), record("q", "op", retry.OutcomeExhausted, time.Now()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not exist")
}

func TestMarkRedrivenOnce(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	ctx := t.Context()
	now := time.Now()
	require.NoError(t, s.Put(ctx, record("r1", "op", retry.OutcomeExhausted, now)))
	require.NoError(t, s.Put(ctx, record("r2", "op", retry.OutcomeExhausted, now.Add(time.Second))))

	ok, err := s.MarkRedriven(ctx, "r1")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = s.MarkRedriven(ctx, "r1")
	require.NoError(t, err)
	assert.False(t, ok, "a record is marked once")
	ok, err = s.MarkRedriven(ctx, "unknown")
	require.NoError(t, err)
	assert.False(t, ok)

	pending, err := s.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, "r2", pending[0].ID)
	got, err := s.Get(ctx, "r1")
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), got.Redriven, time.Minute, "Redriven is the mark's time")
}

func TestDoStoresDeadLetter(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	r, err := retry.New(retry.WithDeadLetter(s, nil), retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)),
		retry.WithName("send-invoice"), retry.WithPayload([]byte("invoice 42")))
	require.NoError(t, err)
	boom := errors.New("smtp: connection refused")
	err = r.Do(t.Context(), func(context.Context) error { return boom })
	require.ErrorIs(t, err, boom)
	assert.NotErrorIs(t, err, retry.ErrDeadLetterNotRecorded)

	recs, err := s.List(t.Context(), deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	dl := recs[0]
	assert.Equal(t, "send-invoice", dl.Name)
	assert.Equal(t, []byte("invoice 42"), dl.Payload)
	assert.Equal(t, 2, dl.Attempts)
	assert.Equal(t, retry.OutcomeExhausted, dl.Reason)
	assert.Equal(t, "smtp: connection refused", dl.LastError)
	assert.Len(t, dl.Errors, 2)
	assert.Len(t, dl.ID, 32)
}

// Error texts may hold any bytes; PostgreSQL text holds neither NUL nor
// invalid UTF-8. The record is stored with U+FFFD in their place.
func TestPutStoresUnstorableText(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	dl := record("u", "op\x00", retry.OutcomeExhausted, time.Now())
	dl.LastError = "bad \x00 byte \xff end"
	dl.Errors[1].Error = "body: \xfe\xff"
	orig := dl.Errors[1].Error
	require.NoError(t, s.Put(t.Context(), dl))
	assert.Equal(t, orig, dl.Errors[1].Error, "the caller's record is not changed")

	got, err := s.Get(t.Context(), "u")
	require.NoError(t, err)
	assert.Equal(t, "op\uFFFD", got.Name)
	assert.Equal(t, "bad \uFFFD byte \uFFFD end", got.LastError)
	assert.Equal(t, "timeout", got.Errors[0].Error)
	assert.Equal(t, "body: \uFFFD", got.Errors[1].Error)

	for _, bad := range []retry.DeadLetter{
		{ID: "a\x00b", GaveUp: time.Now()},
		{ID: "a\xffb", GaveUp: time.Now()},
		{ID: "k", IdempotencyKey: "key\x00", GaveUp: time.Now()},
	} {
		assert.ErrorIs(t, s.Put(t.Context(), bad), retry.ErrInvalidOption, "%q", bad.ID)
	}
}

// IDs sort bytewise in SQL as in Go, whatever the database's collation.
func TestListOrdersIDsBytewise(t *testing.T) {
	pool := pgdltest.Pool(t)
	s := pgdltest.Sink(t, pool)
	var collation string
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT collation_name FROM information_schema.columns WHERE table_name = $1 AND column_name = 'id'", s.Table()).Scan(&collation))
	assert.Equal(t, "C", collation, "the schema sets the collation; the test database may already sort bytewise")
	at := time.Now()
	for _, id := range []string{"b", "B", "a", "_", "A", "é"} {
		require.NoError(t, s.Put(t.Context(), record(id, "op", retry.OutcomeExhausted, at)))
	}
	recs, err := s.List(t.Context(), deadletter.Filter{})
	require.NoError(t, err)
	assert.Equal(t, []string{"A", "B", "_", "a", "b", "é"}, ids(recs))
}

// TestPutBoundsErrorTexts: a record built by hand with huge errors is
// stored bounded, as by the sinks of package deadletter, its payload
// whole (issue #20).
func TestPutBoundsErrorTexts(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	big := strings.Repeat("e", 10<<20)
	dl := record("big1", "charge", retry.OutcomeExhausted, time.Now())
	dl.Payload = []byte(strings.Repeat("p", 1<<20))
	dl.LastError = big
	dl.Errors = nil
	for i := range 20 {
		dl.Errors = append(dl.Errors, retry.AttemptError{Attempt: i + 1, Error: big})
	}
	require.NoError(t, s.Put(t.Context(), dl))
	got, err := s.Get(t.Context(), "big1")
	require.NoError(t, err)
	assert.Equal(t, dl.Payload, got.Payload, "the payload is never cut")
	total := len(got.LastError)
	assert.LessOrEqual(t, len(got.LastError), 4096)
	for _, e := range got.Errors {
		assert.LessOrEqual(t, len(e.Error), 4096, "attempt %d", e.Attempt)
		total += len(e.Error)
	}
	assert.LessOrEqual(t, total, 64<<10, "the record's error texts")
	require.NotEmpty(t, got.Errors)
	assert.Equal(t, 1, got.Errors[0].Attempt)
	assert.Equal(t, 20, got.Errors[len(got.Errors)-1].Attempt)
}
