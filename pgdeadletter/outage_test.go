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
	"github.com/steadfast-go/retry/deadletter"
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

// outageRig makes failing calls whose dead letters go to PostgreSQL
// through an outageProxy, and keeps what each call's Do said.
type outageRig struct {
	proxy *outageProxy
	check *pgdeadletter.Sink // the same table, reached directly
	r     *retry.Retrier
	next  atomic.Int64

	mu          sync.Mutex // guards recorded and notRecorded
	recorded    map[string]bool
	notRecorded map[string]bool
}

var errDownstream = errors.New("downstream unavailable")

func newOutageRig(t *testing.T) *outageRig {
	direct := pgdltest.Pool(t)
	table := pgdltest.Table(t, direct)
	check, err := pgdeadletter.New(direct, &pgdeadletter.Options{Table: table})
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
	sink, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: table})
	require.NoError(t, err)
	r, err := retry.New(retry.WithDeadLetter(sink, &retry.DeadLetterOptions{Timeout: 5 * time.Second}), retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)))
	require.NoError(t, err)
	return &outageRig{proxy: p, check: check, r: r, recorded: map[string]bool{}, notRecorded: map[string]bool{}}
}

// call makes one failing call, with a unique payload, and reports whether
// Do said its dead letter was lost.
func (o *outageRig) call(t *testing.T) (lost bool) {
	id := strconv.FormatInt(o.next.Add(1), 10)
	call, err := o.r.With(retry.WithPayload([]byte(id)))
	require.NoError(t, err)
	err = call.Do(t.Context(), func(context.Context) error { return errDownstream })
	assert.ErrorIs(t, err, errDownstream, "the call's own failure is kept")
	lost = errors.Is(err, retry.ErrDeadLetterNotRecorded)
	o.mu.Lock()
	defer o.mu.Unlock()
	if lost {
		o.notRecorded[id] = true
	} else {
		o.recorded[id] = true
	}
	return lost
}

// stored returns the payloads of the stored records, failing the test on
// a duplicate.
func (o *outageRig) stored(t *testing.T) map[string]bool {
	recs, err := o.check.List(t.Context(), deadletter.Filter{})
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, dl := range recs {
		id := string(dl.Payload)
		assert.False(t, seen[id], "call %s stored twice", id)
		seen[id] = true
	}
	return seen
}

// Calls that give up while the database is unreachable are reported with
// ErrDeadLetterNotRecorded; all others are stored, once each, also after
// the database comes back: stored + not recorded = calls, no duplicates.
func TestOutageLosesNoDeadLetter(t *testing.T) {
	const perPhase, workers = 60, 6
	o := newOutageRig(t)
	// phase makes perPhase calls on workers goroutines.
	phase := func() (stored, lost int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range perPhase / workers {
					l := o.call(t)
					mu.Lock()
					if l {
						lost++
					} else {
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
	o.proxy.setDown(true)
	stored, lost = phase()
	assert.Equal(t, perPhase, lost, "during the outage every call reports its dead letter lost")
	assert.Zero(t, stored)
	o.proxy.setDown(false)
	stored, lost = phase()
	assert.Equal(t, perPhase, stored, "after the outage the pool reconnects and stores again")
	assert.Zero(t, lost)

	seen := o.stored(t)
	assert.Equal(t, o.recorded, seen, "exactly the calls that Do called recorded are stored")
	for id := range o.notRecorded {
		assert.False(t, seen[id], "call %s both stored and reported lost", id)
	}
	assert.Equal(t, 3*perPhase, len(seen)+len(o.notRecorded), "stored + not recorded = calls")
}

// The connections are cut while calls are writing their dead letters. No
// call is lost silently: each is stored or reported lost. A Put whose
// commit succeeded but whose reply was cut is both, which errs on the safe
// side (the caller keeps work that is also recorded); only calls in flight
// at the cut can be in that case.
func TestOutageMidFlightLosesNoDeadLetter(t *testing.T) {
	const calls, workers = 240, 6
	o := newOutageRig(t)
	var done atomic.Int64
	at60, at120 := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// Cut at 60 calls, restore at 120, while the workers run on.
		<-at60
		o.proxy.setDown(true)
		<-at120
		o.proxy.setDown(false)
	})
	for range workers {
		wg.Go(func() {
			for range calls / workers {
				o.call(t)
				switch done.Add(1) {
				case 60:
					close(at60)
				case 120:
					close(at120)
				}
			}
		})
	}
	wg.Wait()

	seen := o.stored(t)
	both := 0
	for id := range o.recorded {
		assert.True(t, seen[id], "call %s was reported recorded but is not stored", id)
	}
	for id := range o.notRecorded {
		if seen[id] {
			both++
		}
	}
	for id := range seen {
		assert.True(t, o.recorded[id] || o.notRecorded[id], "stored record %s belongs to no call", id)
	}
	assert.Equal(t, calls, len(o.recorded)+len(o.notRecorded), "every call ended one way")
	assert.LessOrEqual(t, both, workers, "only calls in flight at the cut can be both stored and reported lost")
	assert.Positive(t, len(o.notRecorded), "the outage was seen")
	assert.Greater(t, len(o.recorded), 60, "storing resumed after the outage")
	t.Logf("%d stored, %d reported lost, %d of those stored all the same", len(seen), len(o.notRecorded), both)
}
