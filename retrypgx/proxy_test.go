package retrypgx_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// commitCutter is a TCP proxy on loopback between the tests and a
// PostgreSQL server. Armed, it passes the next COMMIT on to the server
// and, once the server has answered, closes the client's connection
// without passing the answer on: the transaction committed, and the
// client cannot know.
type commitCutter struct {
	ln     net.Listener
	target string
	url    url.URL // the server's URL, with the proxy's address
	armed  atomic.Bool
	cut    atomic.Int32 // COMMITs cut
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newCommitCutter(t testing.TB, serverURL string) (*commitCutter, string) {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitCutter{ln: ln, target: u.Host, url: *u}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	p.url = *u
	return p, u.String()
}

// proxyURL is the URL of the server through p.
func proxyURL(p *commitCutter) string { return p.url.String() }

func (p *commitCutter) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *commitCutter) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *commitCutter) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.track(client)
		p.track(server)
		var swallow atomic.Bool
		p.wg.Add(2)
		go p.toServer(client, server, &swallow)
		go p.toClient(server, client, &swallow)
	}
}

// toServer passes the client's messages on, one by one, and arms swallow
// when an armed proxy passes a COMMIT.
func (p *commitCutter) toServer(client, server net.Conn, swallow *atomic.Bool) {
	defer p.wg.Done()
	defer server.Close()
	// The startup message has no type byte.
	var n [4]byte
	if _, err := io.ReadFull(client, n[:]); err != nil {
		return
	}
	body := make([]byte, binary.BigEndian.Uint32(n[:])-4)
	if _, err := io.ReadFull(client, body); err != nil {
		return
	}
	if _, err := server.Write(append(n[:], body...)); err != nil {
		return
	}
	for {
		var head [5]byte
		if _, err := io.ReadFull(client, head[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		if head[0] == 'Q' && bytes.HasPrefix(bytes.ToLower(body), []byte("commit")) && p.armed.CompareAndSwap(true, false) {
			swallow.Store(true)
		}
		if _, err := server.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}

// toClient passes the server's answers on, until swallow is armed: then
// the next answer, COMMIT's, is dropped and both connections closed.
func (p *commitCutter) toClient(server, client net.Conn, swallow *atomic.Bool) {
	defer p.wg.Done()
	defer client.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && swallow.Load() {
			p.cut.Add(1)
			server.Close()
			return
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
