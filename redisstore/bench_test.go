package redisstore_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/redisstore"
)

// The benchmarks compare the store with its floor, raw go-redis commands
// that move as many bytes on the same client, in the same run. Run each
// round in its own process so that the two interleave (BENCHMARKS.md).

// benchFingerprint is as long as retry.Do's, a hex SHA-256.
var benchFingerprint = strings.Repeat("f", 64)

// benchRecord is a typical stored outcome: a small JSON value.
var benchRecord = idempotency.StoredOutcome{Value: []byte(`{"id":42,"status":"ok"}`)}

// BenchmarkFirstTimeKey measures a first-time key on one connection:
// store, claim then complete; floor, two raw SETs with a TTL, of values as
// long as the store's claimed and completed values. The claims of all
// keys run first and then the completions, so that the server time of
// each, read from INFO commandstats, is its own (see serverClock).
func BenchmarkFirstTimeKey(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=store", func(b *testing.B) {
		s, rt, c, _ := newCountedStoreOn(b, 1)
		keys := benchKeys(b.N, "")
		tokens := make([]string, b.N)
		srv := startServerClock(b, c, rt)
		for i, key := range keys {
			cl, err := s.Claim(ctx, key, benchFingerprint, time.Minute)
			if err != nil || cl.Status != idempotency.ClaimAcquired {
				b.Fatal(cl.Status, err)
			}
			tokens[i] = cl.Token
		}
		srv.lap()
		for i, key := range keys {
			if err := s.Complete(ctx, key, tokens[i], benchRecord, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
		srv.stop()
		reportRoundTrips(b, rt)
	})
	b.Run("impl=floor", func(b *testing.B) {
		_, rt, c, prefix := newCountedStoreOn(b, 1)
		keys := benchKeys(b.N, prefix)
		claimed := "c" + rand.Text() + "64:" + benchFingerprint
		completed := "d" + rand.Text() + "64:" + benchFingerprint + "23:" + string(benchRecord.Value)
		srv := startServerClock(b, c, rt)
		for _, key := range keys {
			if err := c.Set(ctx, key, claimed, time.Minute).Err(); err != nil {
				b.Fatal(err)
			}
		}
		srv.lap()
		for _, key := range keys {
			if err := c.Set(ctx, key, completed, time.Minute).Err(); err != nil {
				b.Fatal(err)
			}
		}
		srv.stop()
		reportRoundTrips(b, rt)
	})
}

// replayKeys is how many completed keys the replay benchmarks cycle over.
const replayKeys = 1024

// BenchmarkReplay measures the claim of a completed key, which returns
// its outcome: store, a Claim; floor, a raw GET of the same Redis key.
func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=store", func(b *testing.B) {
		s, rt, c, _ := newCountedStoreOn(b, 1)
		keys := completedKeys(b, s)
		srv := startServerClock(b, c, rt)
		for i := range b.N {
			cl, err := s.Claim(ctx, keys[i%replayKeys], benchFingerprint, time.Minute)
			if err != nil || cl.Status != idempotency.ClaimCompleted {
				b.Fatal(cl.Status, err)
			}
		}
		srv.stop()
		reportRoundTrips(b, rt)
	})
	b.Run("impl=floor", func(b *testing.B) {
		s, rt, c, prefix := newCountedStoreOn(b, 1)
		keys := completedKeys(b, s)
		for i := range keys {
			keys[i] = prefix + keys[i]
		}
		srv := startServerClock(b, c, rt)
		for i := range b.N {
			if err := c.Get(ctx, keys[i%replayKeys]).Err(); err != nil {
				b.Fatal(err)
			}
		}
		srv.stop()
		reportRoundTrips(b, rt)
	})
}

// benchKeys returns n distinct keys under prefix, made before the timer
// starts so that neither side pays for them.
func benchKeys(n int, prefix string) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	return keys
}

// completedKeys completes replayKeys keys in s and returns them.
func completedKeys(b *testing.B, s *redisstore.Store) []string {
	ctx := context.Background()
	keys := benchKeys(replayKeys, "")
	for _, key := range keys {
		cl, err := s.Claim(ctx, key, benchFingerprint, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(ctx, key, cl.Token, benchRecord, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	return keys
}

func reportRoundTrips(b *testing.B, rt *roundTrips) {
	b.ReportMetric(float64(rt.writes.Load())/float64(b.N), "round-trips/op")
}

// serverClock adds up the server time of a benchmark's commands, from
// Redis's own counters (INFO commandstats, zeroed by CONFIG RESETSTAT),
// read on a client of its own so that the benchmark's round trips do not
// count them.
// A script's counter includes the commands it calls, which Redis also
// counts under their own names; so each lap takes a script's time alone
// where one ran, else the sum of the plain commands.
type serverClock struct {
	b    *testing.B
	c    *redis.Client
	usec float64
}

// startServerClock zeroes the counters of c's server and rt, and starts
// the benchmark's timer.
func startServerClock(b *testing.B, c *redis.Client, rt *roundTrips) *serverClock {
	own := redis.NewClient(&redis.Options{Addr: c.Options().Addr})
	b.Cleanup(func() { _ = own.Close() })
	sc := &serverClock{b: b, c: own}
	sc.reset()
	rt.reset()
	b.ReportAllocs()
	b.ResetTimer()
	return sc
}

func (sc *serverClock) reset() {
	if err := sc.c.ConfigResetStat(context.Background()).Err(); err != nil {
		sc.b.Fatal(err)
	}
}

// lap adds the server time since the last lap, with the timer stopped.
func (sc *serverClock) lap() {
	sc.b.StopTimer()
	defer sc.b.StartTimer()
	info, err := sc.c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		sc.b.Fatal(err)
	}
	var scripts, plain float64
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":")
		if !ok || name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		usec := statField(fields, "usec")
		if strings.HasPrefix(name, "eval") {
			scripts += usec
		} else {
			plain += usec
		}
	}
	if scripts > 0 {
		sc.usec += scripts
	} else {
		sc.usec += plain
	}
	sc.reset()
}

// stop takes the last lap and reports the server time per op.
func (sc *serverClock) stop() {
	sc.lap()
	sc.b.StopTimer()
	sc.b.ReportMetric(sc.usec/float64(sc.b.N), "server-µs/op")
}

// statField reads name's value from an INFO commandstats line's fields.
func statField(fields, name string) float64 {
	for f := range strings.SplitSeq(fields, ",") {
		if k, v, ok := strings.Cut(f, "="); ok && k == name {
			x, _ := strconv.ParseFloat(v, 64)
			return x
		}
	}
	return 0
}

// BenchmarkClaimCompleteParallel is a first-time key, claimed and
// completed, from GOMAXPROCS goroutines sharing one Store and the
// client's pool.
func BenchmarkClaimCompleteParallel(b *testing.B) {
	s, rt := newCountedStore(b, 0)
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := strconv.FormatInt(next.Add(1), 10)
			cl, err := s.Claim(ctx, key, benchFingerprint, time.Minute)
			if err != nil || cl.Status != idempotency.ClaimAcquired {
				b.Error(cl.Status, err)
				return
			}
			if err := s.Complete(ctx, key, cl.Token, benchRecord, time.Minute); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(rt.writes.Load())/float64(next.Load()), "round-trips/op")
}

// BenchmarkDo measures retry.DoValue with this store on a first-time key
// whose fn succeeds at once: claim, fn, complete.
func BenchmarkDo(b *testing.B) {
	s, rt := newCountedStore(b, 1)
	r, err := retry.New(retry.WithIdempotency(s, nil))
	if err != nil {
		b.Fatal(err)
	}
	fn := func(context.Context) (string, error) { return "receipt", nil }
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ctx := retry.ContextWithIdempotencyKey(context.Background(), strconv.Itoa(i))
		i++
		if _, err := retry.DoValueOn(ctx, r, fn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(rt.writes.Load())/float64(i), "round-trips/op")
}
