package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
)

// DefaultFaultProxyDialTimeout bounds the proxy's dial to its target when
// [FaultProxyOptions].DialTimeout is 0.
const DefaultFaultProxyDialTimeout = 5 * time.Second

// FaultProxyOptions configures [NewFaultProxy]. The zero value forwards
// every byte faithfully.
type FaultProxyOptions struct {
	// CutProbability is the chance, from 0 to 1, that the proxy cuts a
	// connection instead of forwarding a chunk (whatever one read from
	// either side returned). A cut forwards a random part of the chunk,
	// possibly none, then resets both sides, so that a request may be
	// lost before the server sees it or its reply after the server acted
	// on it. Default: 0, no random cuts. See [FaultProxy.SetCutProbability].
	CutProbability float64
	// Seed seeds the random cuts. Each connection and direction draws
	// from its own stream, derived from Seed and the connection's accept
	// order, so a given seed repeats the same decisions for the same
	// sequence of chunks. How the kernel splits a stream into chunks
	// depends on timing, so concurrent traffic repeats only in
	// distribution. Default: 0, a seed like any other.
	Seed uint64
	// DialTimeout bounds the dial to the target for each accepted
	// connection; a connection whose dial fails is reset. Default:
	// [DefaultFaultProxyDialTimeout].
	DialTimeout time.Duration
}

// FaultStats counts what a [FaultProxy] did since it started.
type FaultStats struct {
	Accepted    int64 // connections accepted, refused ones included
	Refused     int64 // connections reset at once by [FaultProxy.Refuse]
	DialErrors  int64 // connections reset because the target did not answer
	RandomCuts  int64 // connections cut by CutProbability
	ForcedCuts  int64 // connections cut by [FaultProxy.CutAll]
	ChunksMoved int64 // chunks forwarded whole, both directions
}

// FaultProxy is a TCP proxy that injects network faults between a client
// and a server: random cuts, cuts on demand, refused or paused new
// connections. Build it with [NewFaultProxy]; the zero value is not
// usable. Its methods are safe for concurrent use, from fn or a hook too.
type FaultProxy struct {
	t       testing.TB
	ln      net.Listener
	target  string
	seed    uint64
	dialTTL time.Duration
	cutP    atomic.Uint64 // math.Float64bits of the cut probability
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	conns   map[*proxyConn]struct{}
	refuse  bool
	paused  chan struct{} // closed on resume; nil when not paused
	nextID  uint64
	closing bool

	accepted, refused, dialErrors, randomCuts, forcedCuts, chunks atomic.Int64
}

// NewFaultProxy starts a proxy on 127.0.0.1 (a free port; see
// [FaultProxy.Addr]) that forwards each connection to target, a host:port.
// Invalid options fail the test at once. The proxy is closed, with every
// connection and goroutine it started, when the test ends.
func NewFaultProxy(t testing.TB, target string, opts FaultProxyOptions) *FaultProxy {
	t.Helper()
	if err := checkCutProbability(opts.CutProbability); err != nil {
		t.Fatalf("storetest: NewFaultProxy: %v", err)
	}
	if opts.DialTimeout < 0 {
		t.Fatalf("storetest: NewFaultProxy: %v", fmt.Errorf("%w: the dial timeout is %v; it must not be negative", retry.ErrInvalidOption, opts.DialTimeout))
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = DefaultFaultProxyDialTimeout
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("storetest: NewFaultProxy: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &FaultProxy{
		t: t, ln: ln, target: target, seed: opts.Seed, dialTTL: opts.DialTimeout,
		ctx: ctx, stop: stop, conns: map[*proxyConn]struct{}{},
	}
	p.cutP.Store(math.Float64bits(opts.CutProbability))
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.Close)
	return p
}

func checkCutProbability(prob float64) error {
	if !(prob >= 0 && prob <= 1) { // also catches NaN
		return fmt.Errorf("%w: the cut probability is %v; it must be from 0 to 1", retry.ErrInvalidOption, prob)
	}
	return nil
}

// Addr returns the proxy's address, 127.0.0.1:port, for clients to dial
// instead of the target.
func (p *FaultProxy) Addr() string { return p.ln.Addr().String() }

// SetCutProbability changes the chance that forwarding a chunk cuts its
// connection (see [FaultProxyOptions].CutProbability), from the next
// chunk on, for every connection. A value outside 0 to 1 changes nothing
// and returns an error wrapping [retry.ErrInvalidOption].
func (p *FaultProxy) SetCutProbability(prob float64) error {
	if err := checkCutProbability(prob); err != nil {
		return fmt.Errorf("storetest: SetCutProbability: %w", err)
	}
	p.cutP.Store(math.Float64bits(prob))
	return nil
}

// CutAll resets every current connection, held (paused) ones included,
// as if the network failed or the server died, and returns how many it
// cut. New connections are forwarded as before; combine it with
// [FaultProxy.Refuse] for a server that stays away.
func (p *FaultProxy) CutAll() int {
	p.mu.Lock()
	cs := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	n := 0
	for _, c := range cs {
		if c.cut(&p.forcedCuts) {
			n++
		}
	}
	return n
}

// Refuse sets whether new connections are refused: while on, each one is
// accepted and reset at once, without a dial to the target, so the client
// fails fast as against a server that is down. Current connections are
// left alone. Default: off.
func (p *FaultProxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// Pause sets whether new connections are held, accepted but not dialled
// on, like a server that never answers, until Pause(false) lets them
// through or [FaultProxy.CutAll] or Close cuts them. Current connections
// are left alone; Refuse wins over Pause. Default: off.
func (p *FaultProxy) Pause(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.paused == nil:
		p.paused = make(chan struct{})
	case !on && p.paused != nil:
		close(p.paused)
		p.paused = nil
	}
}

// Stats returns what the proxy did so far.
func (p *FaultProxy) Stats() FaultStats {
	return FaultStats{
		Accepted:    p.accepted.Load(),
		Refused:     p.refused.Load(),
		DialErrors:  p.dialErrors.Load(),
		RandomCuts:  p.randomCuts.Load(),
		ForcedCuts:  p.forcedCuts.Load(),
		ChunksMoved: p.chunks.Load(),
	}
}

// Close stops the proxy: it stops listening, resets every connection and
// waits for all its goroutines. It runs when the test ends; calling it
// earlier, or again, is fine.
func (p *FaultProxy) Close() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.stop()
	_ = p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}

func (p *FaultProxy) acceptLoop() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() == nil {
				p.t.Errorf("storetest: fault proxy: accept: %v", err)
			}
			return
		}
		p.accepted.Add(1)
		p.mu.Lock()
		if p.closing {
			p.mu.Unlock()
			reset(client)
			return
		}
		id := p.nextID
		p.nextID++
		c := newProxyConn(p.ctx, client)
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c, id) })
	}
}

// serve forwards one connection until either side ends it or it is cut.
func (p *FaultProxy) serve(c *proxyConn, id uint64) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	if !p.admit(c) {
		c.cut(nil)
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, p.dialTTL) // a cut ends the dial too
	server, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		var count *atomic.Int64
		if p.ctx.Err() == nil {
			count = &p.dialErrors
		}
		c.cut(count)
		return
	}
	if !c.attach(server) {
		reset(server)
		return
	}
	var dirs sync.WaitGroup
	dirs.Go(func() { p.pipe(c, c.client, server, rand.New(rand.NewPCG(p.seed, id<<1))) })
	dirs.Go(func() { p.pipe(c, server, c.client, rand.New(rand.NewPCG(p.seed, id<<1|1))) })
	dirs.Wait()
	c.close()
}

// admit waits while new connections are paused and says whether c may be
// forwarded.
func (p *FaultProxy) admit(c *proxyConn) bool {
	for {
		p.mu.Lock()
		refuse, paused := p.refuse, p.paused
		p.mu.Unlock()
		switch {
		case refuse:
			p.refused.Add(1) // before the reset, which the client may see at once
			return false
		case paused == nil:
			return true
		}
		select {
		case <-paused:
		case <-c.ctx.Done():
			return false
		}
	}
}

// pipe copies src to dst one chunk at a time, drawing for each chunk
// whether to cut the connection instead. At src's end it passes the
// half-close on; on any error it cuts the connection.
func (p *FaultProxy) pipe(c *proxyConn, src, dst net.Conn, rng *rand.Rand) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if rng.Float64() < math.Float64frombits(p.cutP.Load()) {
				_, _ = dst.Write(buf[:rng.IntN(n)])
				c.cut(&p.randomCuts)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				c.cut(nil)
				return
			}
			p.chunks.Add(1)
		}
		if errors.Is(err, io.EOF) {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
			c.cut(nil)
			return
		}
		if err != nil {
			c.cut(nil)
			return
		}
	}
}

// proxyConn is one client connection and, once dialled, its server side.
type proxyConn struct {
	client net.Conn
	ctx    context.Context // done once the connection is cut or closed
	end    context.CancelFunc

	mu     sync.Mutex
	server net.Conn
	done   bool
}

func newProxyConn(parent context.Context, client net.Conn) *proxyConn {
	ctx, end := context.WithCancel(parent)
	return &proxyConn{client: client, ctx: ctx, end: end}
}

// attach sets the server side, unless c was cut meanwhile.
func (c *proxyConn) attach(server net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return false
	}
	c.server = server
	return true
}

// cut resets both sides and reports whether this call ended c. It adds 1
// to count, if not nil, before the client can see the reset.
func (c *proxyConn) cut(count *atomic.Int64) bool { return c.finish(reset, count) }

// close closes both sides gracefully, after both directions ended: a
// reset could drop the last bytes still on their way.
func (c *proxyConn) close() { c.finish(func(conn net.Conn) { _ = conn.Close() }, nil) }

func (c *proxyConn) finish(closeConn func(net.Conn), count *atomic.Int64) bool {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return false
	}
	c.done = true
	server := c.server
	c.mu.Unlock()
	if count != nil {
		count.Add(1)
	}
	c.end()
	closeConn(c.client)
	if server != nil {
		closeConn(server)
	}
	return true
}

// reset closes conn with an RST rather than a FIN, as a failed network
// or a killed host does: the peer's next read or write fails.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
