package redislimit_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/redislimit"
)

// sharedPause is a Pause shared through a PauseShare on c, as a process
// has it, started and subscribed; it is closed when the test ends.
type sharedPause struct {
	*overload.Pause
	share *redislimit.PauseShare
}

func newSharedPause(t *testing.T, c redis.UniversalClient, o redislimit.PauseShareOptions, partitioned bool) sharedPause {
	t.Helper()
	share, err := redislimit.NewPauseShare(c, &o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, share.Close()) })
	p, err := overload.NewPause(overload.PauseOptions{Partitioned: partitioned, OnPause: share.Publish})
	require.NoError(t, err)
	require.NoError(t, share.Start(p))
	select {
	case <-share.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("the PauseShare did not subscribe within 5s")
	}
	return sharedPause{p, share}
}

// A pause that one process learns reaches the others' Pause, with the
// same end (to the ms), for its partition only; the process that
// published it ignores its own message.
func TestPauseShare_sharesAPause(t *testing.T) {
	c := newClient(t)
	o := redislimit.PauseShareOptions{Channel: testKey(t, c)}
	a := newSharedPause(t, c, o, true)
	b := newSharedPause(t, clientAt(t, c.Options().Addr), o, true)
	tenantA := overload.WithPartition(t.Context(), "tenant-a")
	tenantB := overload.WithPartition(t.Context(), "tenant-b")

	a.Extend(tenantA, 2*time.Second)
	eventually(t, time.Second, "b to hold tenant-a", func() bool { return !b.Until(tenantA).IsZero() })
	assert.Equal(t, a.Until(tenantA).UnixMilli(), b.Until(tenantA).UnixMilli())
	assert.Positive(t, b.Hold(tenantA, nil))
	assert.Zero(t, b.Hold(tenantB, nil), "tenant-b is not paused")
	// b may hear of the pause before a's publisher counts it.
	eventually(t, time.Second, "a to count the pause published", func() bool { return a.share.Stats().Published == 1 })
	assert.Equal(t, redislimit.PauseStats{Published: 1}, a.share.Stats(), "a ignored its own message")
	assert.Equal(t, redislimit.PauseStats{Received: 1}, b.share.Stats())
}

// An unpartitioned Pause shares the downstream's pause.
func TestPauseShare_unpartitioned(t *testing.T) {
	c := newClient(t)
	o := redislimit.PauseShareOptions{Channel: testKey(t, c)}
	a := newSharedPause(t, c, o, false)
	b := newSharedPause(t, clientAt(t, c.Options().Addr), o, false)
	a.Extend(overload.WithPartition(t.Context(), "ignored"), time.Second)
	eventually(t, time.Second, "b to hold its calls", func() bool { return b.Hold(t.Context(), nil) > 0 })
}

// The pauses in force are stored under Channel, each partition's latest
// end, with the key expiring at the latest of them; a process that
// subscribes later sets them at once, and not those that are over.
func TestPauseShare_laterProcessLoadsStored(t *testing.T) {
	c := newClient(t)
	channel := testKey(t, c)
	o := redislimit.PauseShareOptions{Channel: channel}
	a := newSharedPause(t, c, o, true)
	ctx := t.Context()
	now := time.Now()
	a.share.Publish("long", now.Add(3*time.Second))
	a.share.Publish("long", now.Add(time.Second)) // sooner: kept out
	a.share.Publish("short", now.Add(2*time.Second))
	a.share.Publish("over", now.Add(-time.Second))
	eventually(t, time.Second, "the pauses published", func() bool { return a.share.Stats().Published == 4 })

	stored, err := c.ZRangeWithScores(ctx, channel, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, stored, 2, "the pause that was over is dropped: %v", stored)
	assert.Equal(t, redis.Z{Member: "short", Score: float64(now.Add(2 * time.Second).UnixMilli())}, stored[0])
	assert.Equal(t, redis.Z{Member: "long", Score: float64(now.Add(3 * time.Second).UnixMilli())}, stored[1])
	expiry, err := c.PExpireTime(ctx, channel).Result()
	require.NoError(t, err)
	assert.Equal(t, now.Add(3*time.Second).UnixMilli(), expiry.Milliseconds(), "the key expires with its latest pause")

	late := newSharedPause(t, clientAt(t, c.Options().Addr), o, true)
	assert.Equal(t, now.Add(3*time.Second).UnixMilli(), late.Until(overload.WithPartition(ctx, "long")).UnixMilli())
	assert.Equal(t, now.Add(2*time.Second).UnixMilli(), late.Until(overload.WithPartition(ctx, "short")).UnixMilli())
	assert.Zero(t, late.Hold(overload.WithPartition(ctx, "over"), nil))
	assert.Equal(t, redislimit.PauseStats{Loaded: 2}, late.share.Stats())
}

// Publish never blocks: past Buffer waiting pauses, it drops one and
// counts it. Pauses published before Start go once it runs.
func TestPauseShare_publishDropsWhenFull(t *testing.T) {
	c := newClient(t)
	share, err := redislimit.NewPauseShare(c, &redislimit.PauseShareOptions{Channel: testKey(t, c), Buffer: 2})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, share.Close()) })
	until := time.Now().Add(time.Second)
	for range 5 {
		share.Publish("", until)
	}
	assert.Equal(t, redislimit.PauseStats{Dropped: 3}, share.Stats())
	p, err := overload.NewPause(overload.PauseOptions{})
	require.NoError(t, err)
	require.NoError(t, share.Start(p))
	eventually(t, time.Second, "the waiting pauses published", func() bool { return share.Stats().Published == 2 })
}

// A message on the channel that no PauseShare wrote is counted as an
// error and sets nothing.
func TestPauseShare_malformedMessage(t *testing.T) {
	c := newClient(t)
	channel := testKey(t, c)
	a := newSharedPause(t, c, redislimit.PauseShareOptions{Channel: channel}, false)
	for _, msg := range []string{"", "hello", "p1 ", "p1 id", "p1 id notanumber x", "p1  123 x", "p2 id 123 x"} {
		require.NoError(t, c.Publish(t.Context(), channel, msg).Err())
	}
	eventually(t, time.Second, "the messages counted", func() bool { return a.share.Stats().Errors == 7 })
	assert.False(t, a.Paused())
}

// Without Redis, Start still returns at once; the PauseShare keeps
// trying (counting each failure), never subscribes, and Close stops it.
func TestPauseShare_unreachable(t *testing.T) {
	share, err := redislimit.NewPauseShare(unreachable(t), &redislimit.PauseShareOptions{Channel: "down"})
	require.NoError(t, err)
	p, err := overload.NewPause(overload.PauseOptions{OnPause: share.Publish})
	require.NoError(t, err)
	require.NoError(t, share.Start(p))
	p.Extend(t.Context(), time.Second)
	eventually(t, 5*time.Second, "failures counted", func() bool { return share.Stats().Errors >= 2 })
	select {
	case <-share.Ready():
		t.Fatal("Ready without Redis")
	default:
	}
	start := time.Now()
	require.NoError(t, share.Close())
	assert.Less(t, time.Since(start), time.Second, "Close waits for nothing")
	assert.Zero(t, share.Stats().Published)
}

// A subscription whose connection goes silent (no reset, nothing more
// arrives) is pinged after HealthCheck and made again; the pause
// published meanwhile is read from the stored ones.
func TestPauseShare_silentConnection(t *testing.T) {
	c := newClient(t)
	channel := testKey(t, c)
	proxy := newFreezeProxy(t, c.Options().Addr)
	o := redislimit.PauseShareOptions{Channel: channel, HealthCheck: 50 * time.Millisecond, Timeout: 100 * time.Millisecond}
	b := newSharedPause(t, clientAt(t, proxy.addr()), o, true)
	a := newSharedPause(t, c, o, true)
	ctx := overload.WithPartition(t.Context(), "tenant")

	proxy.freeze()
	a.Extend(ctx, 3*time.Second)
	eventually(t, 5*time.Second, "b to hold the tenant", func() bool { return b.Hold(ctx, nil) > 0 })
	s := b.share.Stats()
	assert.Positive(t, s.Errors, "the silent subscription is counted")
	assert.Equal(t, uint64(1), s.Loaded, "read from the stored pauses once subscribed again")
	assert.Zero(t, s.Received, "the message went to the silent connection")
}

// freezeProxy forwards TCP connections to a server until freeze, which
// silences every current connection without closing it: what is sent
// either way is swallowed, as by a peer that vanished. New connections
// are forwarded.
type freezeProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*frozen
	wg     sync.WaitGroup
}

type frozen struct {
	client, server net.Conn
	mu             sync.Mutex
	silent         bool
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &freezeProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.client.Close()
			_ = c.server.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *freezeProxy) addr() string { return p.ln.Addr().String() }

func (p *freezeProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &frozen{client: client, server: server}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		p.wg.Go(func() { c.pipe(server, client) })
		p.wg.Go(func() { c.pipe(client, server) })
	}
}

// pipe copies src to dst until either fails, dropping what it reads
// once the connection is silent; then it closes dst.
func (c *frozen) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		c.mu.Lock()
		silent := c.silent
		c.mu.Unlock()
		if n > 0 && !silent {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.mu.Lock()
		c.silent = true
		c.mu.Unlock()
	}
}

// Start refuses a nil Pause, a second call, and one after Close; Close
// before Start, or twice, is fine.
func TestPauseShare_startAndClose(t *testing.T) {
	c := newClient(t)
	share, err := redislimit.NewPauseShare(c, &redislimit.PauseShareOptions{Channel: testKey(t, c)})
	require.NoError(t, err)
	p, err := overload.NewPause(overload.PauseOptions{})
	require.NoError(t, err)
	require.ErrorIs(t, share.Start(nil), retry.ErrInvalidOption)
	require.NoError(t, share.Start(p))
	require.ErrorContains(t, share.Start(p), "called twice")
	require.NoError(t, share.Close())
	require.NoError(t, share.Close())

	closed, err := redislimit.NewPauseShare(c, &redislimit.PauseShareOptions{Channel: "x"})
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	require.ErrorContains(t, closed.Start(p), "after Close")
}

// Invalid options give an error wrapping retry.ErrInvalidOption that
// names the problem.
func TestNewPauseShare_invalid(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		opts   *redislimit.PauseShareOptions
		want   string
	}{
		{"nil client", nil, &redislimit.PauseShareOptions{Channel: "x"}, "client is nil"},
		{"typed nil ring", (*redis.Ring)(nil), &redislimit.PauseShareOptions{Channel: "x"}, "client is nil"},
		{"nil options", c, nil, "options are nil"},
		{"empty channel", c, &redislimit.PauseShareOptions{}, "Channel is empty"},
		{"hash tag", c, &redislimit.PauseShareOptions{Channel: "{x}"}, "'{' or '}'"},
		{"timeout in seconds", c, &redislimit.PauseShareOptions{Channel: "x", Timeout: 1}, "Timeout 1ns is below 1ms"},
		{"negative buffer", c, &redislimit.PauseShareOptions{Channel: "x", Buffer: -1}, "Buffer -1"},
		{"health check", c, &redislimit.PauseShareOptions{Channel: "x", HealthCheck: -time.Second}, "HealthCheck -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redislimit.NewPauseShare(tc.client, tc.opts)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
