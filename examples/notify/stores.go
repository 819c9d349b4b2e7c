package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/redisstore"
	"github.com/steadfast-go/retry/retrytest"
)

// backends are the idempotency store and the dead-letter sink of a run.
type backends struct {
	store     idempotency.Store
	sink      retry.DeadLetterSink
	storeName string // for the summary
	sinkName  string
	where     string // the deadletters flags that name the sink
	// storeClock is the clock of the memory store (nil for the others,
	// which keep time on their server): the run's timeline moves it.
	storeClock *timelineClock
	// records lists the sink's records; nil without a sink.
	records interface {
		List(context.Context, deadletter.Filter) ([]retry.DeadLetter, error)
	}
	closers []func()
}

func (b *backends) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// openBackends connects to what the flags name: the memory store and the
// dead-letter file by default; Redis for keys with -redis; PostgreSQL for
// keys (unless -redis) and dead letters with -postgres. withSink false
// opens no sink (the -resend mode).
func openBackends(ctx context.Context, c config, withSink bool) (*backends, error) {
	b := &backends{}
	ok := false
	defer func() {
		if !ok {
			b.close()
		}
	}()
	var pool *pgxpool.Pool
	if c.postgres != "" {
		var err error
		if pool, err = openPostgres(ctx, c.postgres); err != nil {
			return nil, err
		}
		b.closers = append(b.closers, pool.Close)
	}
	switch {
	case c.redis != "":
		client := redis.NewClient(&redis.Options{Addr: c.redis, ContextTimeoutEnabled: true, MaxRetries: -1})
		b.closers = append(b.closers, func() { client.Close() })
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := client.Ping(pctx).Err()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("-redis %s: %w", c.redis, err)
		}
		prefix := c.namespace + ":idem:"
		if c.fresh {
			if err := deletePrefix(ctx, client, prefix); err != nil {
				return nil, fmt.Errorf("-fresh: %w", err)
			}
		}
		s, err := redisstore.New(client, &redisstore.Options{Prefix: prefix})
		if err != nil {
			return nil, err
		}
		b.store, b.storeName = s, fmt.Sprintf("Redis %s, keys %s*", c.redis, prefix)
	case pool != nil:
		table := c.namespace + "_idempotency"
		s, err := pgstore.New(pool, &pgstore.Options{Table: table})
		if err != nil {
			return nil, err
		}
		if err := s.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("-postgres: creating table %s: %w", table, err)
		}
		if c.fresh {
			if _, err := pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{table}.Sanitize()); err != nil {
				return nil, fmt.Errorf("-fresh: %w", err)
			}
		}
		b.store, b.storeName = s, "PostgreSQL, table "+table
	default:
		b.storeClock = &timelineClock{Clock: retrytest.NewClock()}
		b.store, b.storeName = memstore.New(&memstore.Options{Clock: b.storeClock}), "memory (memstore): this process only"
	}
	if !withSink {
		ok = true
		return b, nil
	}
	if pool != nil {
		table := c.namespace + "_dead_letters"
		s, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: table})
		if err != nil {
			return nil, err
		}
		if err := s.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("-postgres: creating table %s: %w", table, err)
		}
		b.sink, b.sinkName, b.records = s, "PostgreSQL, table "+table, s
		b.where = postgresWhere(c.postgres, table)
	} else {
		f, err := deadletter.OpenFile(c.deadLetters, nil)
		if err != nil {
			return nil, fmt.Errorf("-dead-letters: %w", err)
		}
		b.closers = append(b.closers, func() { f.Close() })
		b.sink, b.sinkName, b.records = f, "JSON Lines file "+c.deadLetters, f
		b.where = "-file " + shellArg(c.deadLetters)
	}
	ok = true
	return b, nil
}

// epoch returns when the run that starts now starts its virtual time:
// now, unless the sink holds records that gave up at or after now. Those
// are an earlier run's, whose virtual time ran ahead of the real time
// (a job's waits and latencies take none: a run of a few seconds has
// records up to -deadline later); the epoch is then just after the last
// of them. So every record of this run gives up at or after the epoch
// and every earlier one before it, and the printed -since, the epoch,
// selects this run's records only.
func (b *backends) epoch(ctx context.Context, now time.Time) (time.Time, error) {
	now = now.Round(0) // the wall clock only, as the records keep it
	if b.records == nil {
		return now, nil
	}
	// Since to the microsecond, as -since is printed (see printCommands).
	recs, err := b.records.List(ctx, deadletter.Filter{Since: now.Truncate(time.Microsecond)})
	var torn *deadletter.TornRecordError
	// A torn line, or a row of a table that cannot be decoded, is no
	// record: the others still say when the earlier run ended.
	if err != nil && !errors.As(err, &torn) && !errors.Is(err, pgdeadletter.ErrUndecodable) {
		return time.Time{}, fmt.Errorf("reading the dead letters (%s): %w", b.sinkName, err)
	}
	for _, dl := range recs {
		if t := dl.GaveUp.Add(time.Microsecond); t.After(now) {
			now = t
		}
	}
	return now, nil
}

func openPostgres(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password and all.
		return nil, fmt.Errorf("-postgres: not a PostgreSQL URL or connection string")
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	return pool, nil
}

// deletePrefix deletes the Redis keys that start with prefix.
func deletePrefix(ctx context.Context, c *redis.Client, prefix string) error {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
			keys = keys[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) > 0 {
		return c.Unlink(ctx, keys...).Err()
	}
	return nil
}
