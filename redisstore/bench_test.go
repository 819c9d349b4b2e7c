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
// round in its own process so that the two interleave, against a Redis
// that serves nothing else (RETRY_TEST_REDIS_ADDR), since the server time
// counts every client's commands (BENCHMARKS.md).

// benchFingerprint is as long as retry.Do's, a hex SHA-256.
var benchFingerprint = strings.Repeat("f", 64)

// benchRecord is a typical stored outcome: a small JSON value.
var benchRecord = idempotency.StoredOutcome{Value: []byte(`{"id":42,"status":"ok"}`)}

// BenchmarkFirstTimeKey measures a first-time key on one connection:
// store, claim then complete; floor, two raw SETs with a TTL, of values as
// long as the store's claimed and completed values.
func BenchmarkFirstTimeKey(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=store", func(b *testing.B) {
		s, rt, c, _ := newCountedStoreOn(b, 1)
		keys := benchKeys(b.N+warmOps, "")
		tokens := make([]string, len(keys))
		runPhases(b, c, rt, func(i int) {
			cl, err := s.Claim(ctx, keys[i], benchFingerprint, time.Minute)
			if err != nil || cl.Status != idempotency.ClaimAcquired {
				b.Fatal(cl.Status, err)
			}
			tokens[i] = cl.Token
		}, func(i int) {
			if err := s.Complete(ctx, keys[i], tokens[i], benchRecord, time.Minute); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("impl=floor", func(b *testing.B) {
		_, rt, c, prefix := newCountedStoreOn(b, 1)
		keys := benchKeys(b.N+warmOps, prefix)
		claimed := "c" + rand.Text() + "64:" + benchFingerprint
		completed := "d" + rand.Text() + "64:" + benchFingerprint + "23:" + string(benchRecord.Value)
		set := func(value string) func(int) {
			return func(i int) {
				if err := c.Set(ctx, keys[i], value, time.Minute).Err(); err != nil {
					b.Fatal(err)
				}
			}
		}
		runPhases(b, c, rt, set(claimed), set(completed))
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
		runPhases(b, c, rt, func(i int) {
			cl, err := s.Claim(ctx, keys[i%replayKeys], benchFingerprint, time.Minute)
			if err != nil || cl.Status != idempotency.ClaimCompleted {
				b.Fatal(cl.Status, err)
			}
		})
	})
	b.Run("impl=floor", func(b *testing.B) {
		s, rt, c, prefix := newCountedStoreOn(b, 1)
		keys := completedKeys(b, s)
		for i := range keys {
			keys[i] = prefix + keys[i]
		}
		runPhases(b, c, rt, func(i int) {
			if err := c.Get(ctx, keys[i%replayKeys]).Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// warmOps is how many ops of each phase run untimed first, on keys of
// their own: the first thousands of commands after a pause cost the server
// several times what later ones do, which would count against whichever
// side runs first.
const warmOps = 2000

// runPhases runs each phase, op i for i from b.N to b.N+warmOps untimed,
// then for i below b.N timed, one phase after another: for a first-time
// key all the claims, then all the completions, so that the server time
// of each phase, read from INFO commandstats, is its own (see
// serverClock). It reports the server time and round trips per op.
func runPhases(b *testing.B, c *redis.Client, rt *roundTrips, phases ...func(i int)) {
	for _, phase := range phases {
		for i := b.N; i < b.N+warmOps; i++ {
			phase(i)
		}
	}
	srv := startServerClock(b, c, rt)
	for _, phase := range phases {
		for i := range b.N {
			phase(i)
		}
		srv.lap()
	}
	b.StopTimer()
	b.Logf("b.N %d: server µs per op of each phase: %.2f", b.N, srv.laps)
	b.ReportMetric(srv.usec/float64(b.N), "server-µs/op")
	b.ReportMetric(float64(rt.writes.Load())/float64(b.N), "round-trips/op")
}

// BenchmarkPaired runs the store and its floor op by op in one loop,
// alternating which goes first, and reports each side's wall time per op
// and their ratio: on a loaded machine the load then falls on both sides
// alike, which separate benchmarks do not ensure. Its allocations are the
// two sides' together; BenchmarkFirstTimeKey and BenchmarkReplay have
// each side's.
func BenchmarkPaired(b *testing.B) {
	ctx := context.Background()
	b.Run("path=first-time-key", func(b *testing.B) {
		s, _, c, prefix := newCountedStoreOn(b, 1)
		keys := benchKeys(b.N+warmOps, "")
		floorKeys := benchKeys(b.N+warmOps, prefix+"floor:")
		claimed := "c" + rand.Text() + "64:" + benchFingerprint
		completed := "d" + rand.Text() + "64:" + benchFingerprint + "23:" + string(benchRecord.Value)
		runPaired(b, func(i int) {
			cl, err := s.Claim(ctx, keys[i], benchFingerprint, time.Minute)
			if err != nil || cl.Status != idempotency.ClaimAcquired {
				b.Fatal(cl.Status, err)
			}
			if err := s.Complete(ctx, keys[i], cl.Token, benchRecord, time.Minute); err != nil {
				b.Fatal(err)
			}
		}, func(i int) {
			if err := c.Set(ctx, floorKeys[i], claimed, time.Minute).Err(); err != nil {
				b.Fatal(err)
			}
			if err := c.Set(ctx, floorKeys[i], completed, time.Minute).Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("path=replay", func(b *testing.B) {
		s, _, c, prefix := newCountedStoreOn(b, 1)
		keys := completedKeys(b, s)
		runPaired(b, func(i int) {
			cl, err := s.Claim(ctx, keys[i%replayKeys], benchFingerprint, time.Minute)
			if err != nil || cl.Status != idempotency.ClaimCompleted {
				b.Fatal(cl.Status, err)
			}
		}, func(i int) {
			if err := c.Get(ctx, prefix+keys[i%replayKeys]).Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// runPaired runs store(i) and floor(i) for i from b.N to b.N+warmOps
// untimed, then for i below b.N, timing each.
func runPaired(b *testing.B, store, floor func(i int)) {
	for i := b.N; i < b.N+warmOps; i++ {
		store(i)
		floor(i)
	}
	var inStore, inFloor time.Duration
	timed := func(op func(int), i int, sum *time.Duration) {
		start := time.Now()
		op(i)
		*sum += time.Since(start)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			timed(store, i, &inStore)
			timed(floor, i, &inFloor)
		} else {
			timed(floor, i, &inFloor)
			timed(store, i, &inStore)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(inStore.Microseconds())/float64(b.N), "store-µs/op")
	b.ReportMetric(float64(inFloor.Microseconds())/float64(b.N), "floor-µs/op")
	b.ReportMetric(float64(inStore)/float64(inFloor), "store/floor")
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

// serverClock adds up the server time of a benchmark's commands, from
// Redis's own counters (INFO commandstats, zeroed by CONFIG RESETSTAT),
// read on a client of its own so that the benchmark's round trips do not
// count them. A script's counter includes the commands it calls, which Redis also
// counts under their own names; so each lap takes a script's time alone
// where one ran, else the sum of the plain commands.
type serverClock struct {
	b    *testing.B
	c    *redis.Client
	usec float64
	laps []float64 // µs per op of each lap
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
	lap := plain
	if scripts > 0 {
		lap = scripts
	}
	sc.usec += lap
	sc.laps = append(sc.laps, lap/float64(sc.b.N))
	sc.reset()
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
