package pgdltest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A test's own server answers, loses its connections to Kill9, keeps
// what was committed, and answers again on the same URL after Start.
func TestServerKill9AndRestart(t *testing.T) {
	s := StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	conn, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}

	s.Kill9()
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a query on a connection to a killed server succeeded")
	}
	conn.Close(ctx)
	if c, err := pgx.Connect(ctx, s.URL()); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a killed server")
	}

	s.Start()
	conn, err = pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT n FROM kept").Scan(&n); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if n != 42 {
		t.Fatalf("after the restart the committed row reads %d, want 42", n)
	}
}

// Stop shuts the server down cleanly and Start brings it back.
func TestServerStopAndStart(t *testing.T) {
	s := StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.Stop()
	if c, err := pgx.Connect(ctx, s.URL()); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	s.Start()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
}

// Without the PostgreSQL binaries a test skips and says how to install
// them; under CI=true it fails instead (not run here: it would fail).
func TestStartServerSkipsWithoutBinaries(t *testing.T) {
	t.Setenv("CI", "")
	var sub *testing.T
	t.Run("no binaries", func(t *testing.T) {
		sub = t
		startServer(t, func() (string, error) { return "", errors.New("no initdb and postgres programs found") })
		t.Error("StartServer returned without binaries")
	})
	if !sub.Skipped() {
		t.Fatal("the test was not skipped")
	}
}

// The variable's directory is looked in first.
func TestBinDirHonoursVariable(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvBinDir, dir)
	if got, err := binDir(); err != nil || got != dir {
		t.Fatalf("binDir() = %q, %v; want %q", got, err, dir)
	}
}
