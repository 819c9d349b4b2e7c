package storetest_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/storetest"
)

// echoServer is a loopback server that sends back what it reads, until
// its client half-closes. It counts the connections it accepted.
type echoServer struct {
	addr     string
	accepted atomic.Int32
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &echoServer{addr: ln.Addr().String()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() {
				_, _ = io.Copy(conn, conn)
				_ = conn.(*net.TCPConn).CloseWrite()
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return e
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	return conn
}

// roundTrip sends one byte and reads its echo.
func roundTrip(conn net.Conn) error {
	if _, err := conn.Write([]byte{'x'}); err != nil {
		return err
	}
	var b [1]byte
	_, err := io.ReadFull(conn, b[:])
	return err
}

// requireEnded checks that conn was cut: a read fails, and not because
// its deadline passed.
func requireEnded(t *testing.T, conn net.Conn) {
	t.Helper()
	var b [1]byte
	_, err := conn.Read(b[:])
	require.Error(t, err)
	require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the connection hangs instead of ending")
}

// requireRefused checks that a connection to addr fails at once: the
// dial, or the first read.
func requireRefused(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded)
		return
	}
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	requireEnded(t, conn)
}

func TestFaultProxyForwardsFaithfully(t *testing.T) {
	echo := newEchoServer(t)
	p := storetest.NewFaultProxy(t, echo.addr, storetest.FaultProxyOptions{})
	const conns, size = 4, 256 << 10
	var wg sync.WaitGroup
	for range conns {
		conn := dial(t, p.Addr())
		want := make([]byte, size)
		_, _ = rand.Read(want)
		wg.Go(func() {
			_, err := conn.Write(want)
			assert.NoError(t, err)
			assert.NoError(t, conn.(*net.TCPConn).CloseWrite(), "the half-close goes through")
		})
		wg.Go(func() {
			got, err := io.ReadAll(conn) // ends at the echo's half-close
			assert.NoError(t, err)
			assert.True(t, bytes.Equal(want, got), "got %d bytes back of %d, or different ones", len(got), len(want))
		})
	}
	wg.Wait()
	s := p.Stats()
	assert.Equal(t, int64(conns), s.Accepted)
	assert.Zero(t, s.RandomCuts+s.ForcedCuts+s.Refused+s.DialErrors)
	assert.Positive(t, s.ChunksMoved)
}

func TestFaultProxyCutProbabilityOneCutsTheFirstChunk(t *testing.T) {
	echo := newEchoServer(t)
	p := storetest.NewFaultProxy(t, echo.addr, storetest.FaultProxyOptions{CutProbability: 1})
	conn := dial(t, p.Addr())
	_, err := conn.Write([]byte("ping"))
	require.NoError(t, err)
	var b [4]byte
	_, err = io.ReadFull(conn, b[:])
	require.Error(t, err)
	require.NotErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Equal(t, int64(1), p.Stats().RandomCuts)
	assert.Zero(t, p.Stats().ChunksMoved)
}

// cutsPerConnection runs 1-byte round trips on conns connections, one
// after another, and returns how many each completed before its cut. In
// lockstep every read is one byte, so the chunks, and so the cuts, depend
// only on the seed.
func cutsPerConnection(t *testing.T, target string, seed uint64, conns int) []int {
	p := storetest.NewFaultProxy(t, target, storetest.FaultProxyOptions{CutProbability: 0.1, Seed: seed})
	trips := make([]int, conns)
	for i := range trips {
		conn := dial(t, p.Addr())
		for trips[i] < 1000 && roundTrip(conn) == nil {
			trips[i]++
		}
		_ = conn.Close()
	}
	assert.Equal(t, int64(conns), p.Stats().RandomCuts)
	return trips
}

func TestFaultProxySeedRepeatsTheCuts(t *testing.T) {
	echo := newEchoServer(t)
	const conns = 30
	a := cutsPerConnection(t, echo.addr, 7, conns)
	assert.Equal(t, a, cutsPerConnection(t, echo.addr, 7, conns), "the same seed cuts at the same chunks")
	assert.NotEqual(t, a, cutsPerConnection(t, echo.addr, 8, conns), "another seed cuts elsewhere")
	// Each round trip is two chunks: it survives with probability 0.81,
	// so about 4.3 complete before the cut, on average.
	sum := 0
	for _, n := range a {
		sum += n
	}
	mean := float64(sum) / conns
	assert.InDelta(t, 4.3, mean, 2.5, "round trips per connection: %v", a)
	t.Logf("seed 7, cut probability 0.1: %.1f round trips per connection before the cut: %v", mean, a)
}

func TestFaultProxySetCutProbability(t *testing.T) {
	echo := newEchoServer(t)
	p := storetest.NewFaultProxy(t, echo.addr, storetest.FaultProxyOptions{})
	conn := dial(t, p.Addr())
	for _, bad := range []float64{-0.01, 1.5, math.NaN(), math.Inf(1)} {
		err := p.SetCutProbability(bad)
		require.ErrorIs(t, err, retry.ErrInvalidOption, "%v", bad)
		assert.ErrorContains(t, err, "cut probability")
	}
	require.NoError(t, roundTrip(conn), "a rejected probability changes nothing")

	require.NoError(t, p.SetCutProbability(1))
	require.Error(t, roundTrip(conn), "the change applies to open connections at their next chunk")
	require.NoError(t, p.SetCutProbability(0))
	require.NoError(t, roundTrip(dial(t, p.Addr())))
}

// fatalTB records Fatalf instead of failing the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestNewFaultProxyRejectsBadOptions(t *testing.T) {
	for name, opts := range map[string]storetest.FaultProxyOptions{
		"probability":  {CutProbability: 2},
		"dial timeout": {DialTimeout: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			tb := &fatalTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				storetest.NewFaultProxy(tb, "127.0.0.1:1", opts)
			}()
			<-done
			assert.Contains(t, tb.msg, "invalid")
			assert.Contains(t, tb.msg, name)
		})
	}
}

func TestFaultProxyCutAll(t *testing.T) {
	echo := newEchoServer(t)
	p := storetest.NewFaultProxy(t, echo.addr, storetest.FaultProxyOptions{})
	var conns []net.Conn
	for range 3 {
		conn := dial(t, p.Addr())
		require.NoError(t, roundTrip(conn))
		conns = append(conns, conn)
	}
	assert.Equal(t, 3, p.CutAll())
	for _, conn := range conns {
		requireEnded(t, conn)
	}
	assert.Equal(t, int64(3), p.Stats().ForcedCuts)
	assert.Zero(t, p.CutAll(), "nothing left to cut")
	require.NoError(t, roundTrip(dial(t, p.Addr())), "new connections go through")
}

func TestFaultProxyRefuse(t *testing.T) {
	echo := newEchoServer(t)
	p := storetest.NewFaultProxy(t, echo.addr, storetest.FaultProxyOptions{})
	open := dial(t, p.Addr())
	require.NoError(t, roundTrip(open))

	p.Refuse(true)
	requireRefused(t, p.Addr())
	assert.Equal(t, int64(1), p.Stats().Refused)
	assert.Equal(t, int32(1), echo.accepted.Load(), "a refused connection is not forwarded")
	require.NoError(t, roundTrip(open), "open connections are left alone")

	p.Refuse(false)
	require.NoError(t, roundTrip(dial(t, p.Addr())))
}

// heldConnection returns a proxy with new connections paused, an echoed
// connection opened before the pause, and one held by it.
func heldConnection(t *testing.T) (echo *echoServer, p *storetest.FaultProxy, open, held net.Conn) {
	echo = newEchoServer(t)
	p = storetest.NewFaultProxy(t, echo.addr, storetest.FaultProxyOptions{})
	open = dial(t, p.Addr())
	require.NoError(t, roundTrip(open))
	p.Pause(true)
	held = dial(t, p.Addr())
	waitAccepted(p, 2)
	return echo, p, open, held
}

// waitAccepted waits until p has accepted n connections.
func waitAccepted(p *storetest.FaultProxy, n int64) {
	for p.Stats().Accepted < n {
		time.Sleep(time.Millisecond)
	}
}

func TestFaultProxyPause(t *testing.T) {
	echo, p, open, held := heldConnection(t)
	_, err := held.Write([]byte{'x'})
	require.NoError(t, err)
	require.NoError(t, held.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	var b [1]byte
	_, err = held.Read(b[:])
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a held connection gets no answer")
	assert.Equal(t, int32(1), echo.accepted.Load(), "a held connection is not dialled through")
	require.NoError(t, roundTrip(open), "open connections are left alone")

	p.Pause(false)
	require.NoError(t, held.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadFull(held, b[:])
	require.NoError(t, err, "resuming lets the held connection through with its bytes")

	p.Pause(true)
	cut := dial(t, p.Addr())
	waitAccepted(p, 3)
	assert.Equal(t, 3, p.CutAll(), "held connections are cut too")
	requireEnded(t, cut)

	p.Refuse(true)
	requireRefused(t, p.Addr()) // Refuse wins over Pause
}

func TestFaultProxyResetsWhenTheTargetIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := ln.Addr().String()
	require.NoError(t, ln.Close())

	p := storetest.NewFaultProxy(t, down, storetest.FaultProxyOptions{})
	requireRefused(t, p.Addr())
	assert.Equal(t, int64(1), p.Stats().DialErrors)
}

func TestFaultProxyCloseEndsEverything(t *testing.T) {
	_, p, open, held := heldConnection(t)
	p.Close()
	requireEnded(t, open)
	requireEnded(t, held)
	_, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	require.Error(t, err, "the proxy stopped listening")
	p.Close() // again: a no-op
}
