package pgdltest

import (
	"net"
	"strings"
	"testing"
)

// Without a server, and without CI=true or a chosen URL, a test skips
// and says how to run it.
func TestPoolSkipsWithoutServer(t *testing.T) {
	t.Setenv("CI", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there now

	var sub *testing.T
	t.Run("no server", func(t *testing.T) {
		sub = t
		poolAt(t, "postgres://postgres@"+addr+"/test?sslmode=disable&connect_timeout=2", false)
		t.Error("poolAt returned without a server")
	})
	if !sub.Skipped() {
		t.Fatal("the test was not skipped")
	}
}

func TestURLDefault(t *testing.T) {
	t.Setenv(EnvURL, "")
	if u, set := URL(); u != DefaultURL || set {
		t.Errorf("URL() = %q, %v; want the default, false", u, set)
	}
	t.Setenv(EnvURL, "postgres://elsewhere/db")
	if u, set := URL(); !strings.Contains(u, "elsewhere") || !set {
		t.Errorf("URL() = %q, %v; want the variable's, true", u, set)
	}
}
