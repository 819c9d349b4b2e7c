package pgstore_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Environment of the children of TestExactlyOnceAcrossProcesses.
const (
	effectsEnv = "PGSTORE_TEST_EFFECTS" // side-effect table
	resultsEnv = "PGSTORE_TEST_RESULTS" // table of the values callers got
	keysEnv    = "PGSTORE_TEST_KEYS"    // number of keys
	prefixEnv  = "PGSTORE_TEST_PREFIX"  // key prefix
)

const childGoroutines = 8

// TestChildDo is a child of TestExactlyOnceAcrossProcesses: once told to
// go, its goroutines call retry.DoValue with every key, and it records in
// the results table what each call returned.
func TestChildDo(t *testing.T) {
	if os.Getenv(childEnv) != "do" {
		t.Skip("runs only as a child process of TestExactlyOnceAcrossProcesses")
	}
	store, pool := childStore(t, nil)
	fx := effects{pool: pool, table: os.Getenv(effectsEnv)}
	results := os.Getenv(resultsEnv)
	keys, err := strconv.Atoi(os.Getenv(keysEnv))
	require.NoError(t, err)
	prefix := os.Getenv(prefixEnv)
	r, err := retry.New(
		retry.WithIdempotency(store, nil),
		retry.WithBackoff(retry.Constant(time.Millisecond)),
		retry.WithJitter(retry.NoJitter),
		retry.WithMaxAttempts(math.MaxInt),
	)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	os.Stdout.WriteString("\nready\n")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "go\n", line)

	pid := os.Getpid()
	var wg sync.WaitGroup
	for g := range childGoroutines {
		wg.Go(func() {
			for i := range keys {
				key := fmt.Sprintf("%s%d", prefix, i)
				runner := fmt.Sprintf("pid %d goroutine %d", pid, g)
				v, err := retry.DoValueOn(retry.ContextWithIdempotencyKey(ctx, key), r, func(ctx context.Context) (string, error) {
					if err := fx.insert(ctx, key, runner); err != nil {
						return "", err
					}
					return "done by " + runner, nil
				})
				if !assert.NoError(t, err, key) {
					return
				}
				_, err = pool.Exec(ctx, "INSERT INTO "+results+" (key, value) VALUES ($1, $2)", key, v)
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestExactlyOnceAcrossProcesses runs 4 processes of 8 goroutines that
// all call retry.Do with the same keys, sharing only the database: each
// key's side effect happens exactly once, and every caller in every
// process gets the same value.
func TestExactlyOnceAcrossProcesses(t *testing.T) {
	const processes, keys = 4, 50
	_, pool, table := newStore(t, nil)
	fx := newEffects(t, pool)
	results := table + "_results"
	dropTable(t, pool, results)
	ctx := context.Background()
	_, err := pool.Exec(ctx, "CREATE TABLE "+results+" (key text NOT NULL, value text NOT NULL)")
	require.NoError(t, err)

	env := []string{tableEnv + "=" + table, effectsEnv + "=" + fx.table, resultsEnv + "=" + results,
		keysEnv + "=" + strconv.Itoa(keys), prefixEnv + "=order-"}
	type child struct {
		done  chan error
		start func()
	}
	children := make([]child, processes)
	for i := range children {
		cmd, stdin, out := startChild(t, "TestChildDo", "do", env...)
		waitLine(t, out, "ready")
		done := make(chan error, 1)
		go func() {
			var lines []string
			for out.Scan() { // drain, so the child never blocks on stdout
				lines = append(lines, out.Text())
			}
			err := cmd.Wait()
			if err != nil {
				t.Logf("child %d:\n%s", i, strings.Join(lines, "\n"))
			}
			done <- err
		}()
		children[i] = child{done: done, start: func() {
			_, err := stdin.Write([]byte("go\n"))
			assert.NoError(t, err)
		}}
	}
	for _, c := range children {
		c.start()
	}
	for i, c := range children {
		assert.NoError(t, <-c.done, "child %d failed; its output is above", i)
	}

	rows, err := pool.Query(ctx, `SELECT r.key, count(*), count(DISTINCT r.value),
		(SELECT count(*) FROM `+fx.table+` f WHERE f.key = r.key)
		FROM `+results+` r GROUP BY r.key`)
	require.NoError(t, err)
	seen := 0
	for rows.Next() {
		var key string
		var calls, values, runs int
		require.NoError(t, rows.Scan(&key, &calls, &values, &runs))
		seen++
		assert.Equal(t, processes*childGoroutines, calls, "%s: callers that got a value", key)
		assert.Equal(t, 1, values, "%s: distinct values", key)
		assert.Equal(t, 1, runs, "%s: side effects", key)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, keys, seen)
	var total int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+fx.table).Scan(&total))
	assert.Equal(t, keys, total, "side effects in all")
}
