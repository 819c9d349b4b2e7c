package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
)

// store is where the dead letters are: a file or a PostgreSQL table.
type store interface {
	// each calls fn with each record f selects, oldest first, holding
	// as few as it can (a file: one), and warns of the records it skips.
	each(ctx context.Context, f deadletter.Filter, fn func(retry.DeadLetter) error) error
	// get returns the record id, or an error matching errNotFound.
	get(ctx context.Context, id string) (retry.DeadLetter, error)
	// purge deletes the records f selects and says how many it deleted.
	purge(ctx context.Context, f deadletter.Filter) (int, error)
	// source opens the store for deadletter.Redrive; see pendingSource.
	source(ctx context.Context) (deadletter.Source, error)
	close() error
}

var errNotFound = errors.New("no dead letter with this ID")

// openStore opens the store that o names. Warnings, such as torn lines
// in a file, go to warn.
func openStore(ctx context.Context, o *options, warn io.Writer) (store, error) {
	if o.file != "" {
		return &fileStore{path: o.file, warn: warn}, nil
	}
	cfg, err := pgxpool.ParseConfig(o.postgres)
	if err != nil {
		return nil, usageError("-postgres: %v", err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg) // connects lazily
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	sink, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: o.table})
	if err != nil {
		pool.Close()
		return nil, usageError("-table: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	return &pgStore{pool: pool, sink: sink, warn: warn}, nil
}

// pgStore is a table written by pgdeadletter.Sink.
type pgStore struct {
	pool *pgxpool.Pool
	sink *pgdeadletter.Sink
	warn io.Writer
}

func (s *pgStore) each(ctx context.Context, f deadletter.Filter, fn func(retry.DeadLetter) error) error {
	recs, err := s.sink.List(ctx, f)
	if errors.Is(err, pgdeadletter.ErrUndecodable) {
		// As torn lines in a file: the other records are still shown.
		warn(s.warn, err)
	} else if err != nil {
		return s.hint(err)
	}
	for _, dl := range recs {
		if err := fn(dl); err != nil {
			return err
		}
	}
	return nil
}

func (s *pgStore) get(ctx context.Context, id string) (retry.DeadLetter, error) {
	dl, err := s.sink.Get(ctx, id)
	if errors.Is(err, pgdeadletter.ErrNotFound) {
		return dl, fmt.Errorf("%w: %s", errNotFound, id)
	}
	return dl, s.hint(err)
}

func (s *pgStore) purge(ctx context.Context, f deadletter.Filter) (int, error) {
	n, err := s.sink.Purge(ctx, f)
	return n, s.hint(err)
}

func (s *pgStore) source(context.Context) (deadletter.Source, error) {
	return s.sink, nil
}

func (s *pgStore) close() error {
	s.pool.Close()
	return nil
}

// hint adds what to do to the error of a missing table.
func (s *pgStore) hint(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		return fmt.Errorf("%w (no table %s: check -table, or create it with pgdeadletter's Sink.Migrate)", err, s.sink.Table())
	}
	return err
}
