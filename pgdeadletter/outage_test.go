package pgdeadletter_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outageProxy forwards TCP connections to a PostgreSQL server and can cut
// them: while it is down it closes every open connection and refuses new
// ones, as a server that stopped would.
type outageProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex // guards down and conns
	down  bool
	conns map[net.Conn]struct{}
}

func startProxy(t *testing.T, target string) *outageProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &outageProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

func (p *outageProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		p.wg.Go(func() { pipe(up, c) })
		p.wg.Go(func() { pipe(c, up) })
	}
}

// setDown starts or ends the outage.
func (p *outageProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

func (p *outageProxy) close() {
	p.ln.Close()
	p.setDown(true)
	p.wg.Wait()
}

// Calls that give up while the database is unreachable are reported with
// ErrDeadLetterNotRecorded; all others are stored, once each, also after
// the database comes back: stored + not recorded = calls, no duplicates.
func TestOutageLosesNoDeadLetter(t *testing.T) {
	const perPhase, workers = 60, 6
	direct := pgdltest.Pool(t)
	table := pgdltest.Table(t, direct)
	check, err := pgdeadletter.New(direct, pgdeadletter.WithTable(table))
	require.NoError(t, err)
	require.NoError(t, check.Migrate(t.Context()))

	u, _ := pgdltest.URL()
	cfg, err := pgxpool.ParseConfig(u)
	require.NoError(t, err)
	p := startProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	cfg.ConnConfig.Host = "127.0.0.1"
	cfg.ConnConfig.Port = uint16(p.ln.Addr().(*net.TCPAddr).Port)
	cfg.ConnConfig.Fallbacks = nil
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	sink, err := pgdeadletter.New(pool, pgdeadletter.WithTable(table))
	require.NoError(t, err)

	r, err := retry.New(retry.WithDeadLetter(sink), retry.WithMaxAttempts(2), retry.WithMaxDelay(0),
		retry.WithDeadLetterTimeout(5*time.Second))
	require.NoError(t, err)
	boom := errors.New("downstream unavailable")
	var (
		next        atomic.Int64
		mu          sync.Mutex
		notRecorded = map[string]bool{}
		recorded    int
	)
	// phase makes perPhase failing calls on workers goroutines, each with
	// a unique payload, and sorts them by what Do said.
	phase := func() (stored, lost int) {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range perPhase / workers {
					id := strconv.FormatInt(next.Add(1), 10)
					call, err := r.With(retry.WithPayload([]byte(id)))
					if !assert.NoError(t, err) {
						return
					}
					err = call.Do(t.Context(), func(context.Context) error { return boom })
					assert.ErrorIs(t, err, boom, "the call's own failure is kept")
					mu.Lock()
					if errors.Is(err, retry.ErrDeadLetterNotRecorded) {
						notRecorded[id] = true
						lost++
					} else {
						recorded++
						stored++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return stored, lost
	}

	stored, lost := phase()
	assert.Equal(t, perPhase, stored, "before the outage every dead letter is stored")
	assert.Zero(t, lost)
	p.setDown(true)
	stored, lost = phase()
	assert.Equal(t, perPhase, lost, "during the outage every call reports its dead letter lost")
	assert.Zero(t, stored)
	p.setDown(false)
	stored, lost = phase()
	assert.Equal(t, perPhase, stored, "after the outage the pool reconnects and stores again")
	assert.Zero(t, lost)

	recs, err := check.List(t.Context(), pgdeadletter.Filter{})
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, dl := range recs {
		id := string(dl.Payload)
		assert.False(t, seen[id], "call %s stored twice", id)
		assert.False(t, notRecorded[id], "call %s both stored and reported lost", id)
		seen[id] = true
	}
	assert.Equal(t, recorded, len(recs))
	assert.Equal(t, 3*perPhase, len(seen)+len(notRecorded), "stored + not recorded = calls")
}
