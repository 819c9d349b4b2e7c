package pgdltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvBinDir names the variable that holds the directory of PostgreSQL's
// initdb and postgres programs, when they are not where pg_config or
// /usr/lib/postgresql/*/bin say.
const EnvBinDir = "RETRY_TEST_POSTGRES_BINDIR"

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 30 * time.Second

// Server is a PostgreSQL server of one test's own, on a free port of
// 127.0.0.1 with its data in a temporary directory. A test may kill or
// restart it without touching the shared server; it is removed at the end.
type Server struct {
	tb      testing.TB
	bin     string
	dir     string // the temporary directory; data and log are in it
	data    string
	logPath string
	port    int
	cred    *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// StartServer initialises a data directory and starts a PostgreSQL
// server for this test, stopped and removed when the test ends. Without
// the PostgreSQL binaries the test is skipped, or fails under CI=true.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	return startServer(tb, binDir)
}

// startServer is StartServer with findBin to find the binaries.
func startServer(tb testing.TB, findBin func() (string, error)) *Server {
	tb.Helper()
	bin, err := findBin()
	if err != nil {
		unavailable(tb, err)
	}
	cred, err := credential()
	if err != nil {
		unavailable(tb, err)
	}
	s, err := newServer(tb, bin, cred)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.cleanup)
	s.Start()
	return s
}

// unavailable skips the test, or fails it under CI=true, because no
// PostgreSQL server of its own can be run here.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("cannot run a PostgreSQL server of the test's own: %v", err)
	}
	tb.Skipf("cannot run a PostgreSQL server of the test's own (%v): install it (apt-get install postgresql) or set %s to the directory of initdb and postgres", err, EnvBinDir)
}

// binDir finds the directory that holds initdb and postgres.
func binDir() (string, error) {
	var dirs []string
	if d := os.Getenv(EnvBinDir); d != "" {
		dirs = append(dirs, d)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	globbed, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(globbed))) // newest major first, for versions of one digit count
	dirs = append(dirs, globbed...)
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("no initdb and postgres programs found")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// credential returns the user to run PostgreSQL as: nil for the current
// one, or the postgres user when running as root, since PostgreSQL refuses
// to run as root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and no postgres user to run the server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user's uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user's gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// newServer makes the data directory with initdb and writes the settings;
// it does not start the server.
func newServer(tb testing.TB, bin string, cred *syscall.Credential) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgdltest-")
	if err != nil {
		return nil, err
	}
	s := &Server{tb: tb, bin: bin, dir: dir, data: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "postgres.log"), cred: cred}
	fail := func(err error) (*Server, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the postgres user must reach data inside
		return fail(err)
	}
	if err := os.Mkdir(s.data, 0o700); err != nil {
		return fail(err)
	}
	if cred != nil {
		if err := os.Chown(s.data, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.data, "-U", "postgres", "--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	if s.port, err = freePort(); err != nil {
		return fail(err)
	}
	// fsync off: a killed process leaves its writes in the kernel, so a
	// commit survives Kill9 (not a power cut). synchronous_commit stays on:
	// off, a reported commit could be lost to Kill9.
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = ''
fsync = off
full_page_writes = off
shared_buffers = 32MB
max_connections = 200
`, s.port)
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fail(fmt.Errorf("writing postgresql.conf: %w", err))
	}
	return s, nil
}

// freePort returns a port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// URL returns the URL of the server's postgres database, as user postgres.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Port returns the port the server listens on; it stays the same across
// restarts.
func (s *Server) Port() int { return s.port }

// Start starts the server, on the same port and data directory as before,
// and returns once it accepts connections. After Kill9 it runs crash
// recovery first. It fails the test if the server does not come up.
func (s *Server) Start() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatal(err)
	}
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgdltest: Start of a server that is running")
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A process group of its own, so Kill9 takes the backends down too,
	// as a crash of the machine would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	err = cmd.Start()
	logFile.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	if err := s.awaitReady(done); err != nil {
		s.killLocked()
		return fmt.Errorf("%w\n%s", err, s.logTail())
	}
	return nil
}

// awaitReady returns once the server accepts a query, or with an error
// when it exits or takes longer than startTimeout.
func (s *Server) awaitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL())
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("postgres exited before accepting connections")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %v: %v", startTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill9 sends SIGKILL to the server and all its backends at once, as a
// crash would, and returns once the server has exited. Clients see their
// connections drop; nothing is shut down cleanly.
func (s *Server) Kill9() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	if s.cmd == nil {
		return
	}
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.done
	// The backends, orphaned now, must be gone before a restart reuses the
	// shared memory; bounded, in case nobody reaps them.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
	}
	s.cmd, s.done = nil, nil
}

// Stop shuts the server down cleanly (a fast shutdown: sessions are ended,
// open transactions rolled back) and returns once it has exited.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
		s.cmd, s.done = nil, nil
	case <-time.After(startTimeout):
		s.killLocked()
	}
}

// cleanup stops the server and removes its directory.
func (s *Server) cleanup() {
	s.Kill9() // nothing left to keep; faster than a clean shutdown
	if err := os.RemoveAll(s.dir); err != nil {
		s.tb.Errorf("removing the test server's directory: %v", err)
	}
}

// logTail returns the end of the server's log, for errors.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "postgres log:\n" + string(bytes.TrimSpace(b))
}
