package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// fileStore is a JSON Lines file written by deadletter.FileSink.
type fileStore struct {
	path   string
	warn   io.Writer
	warned bool                 // torn lines were reported: once is enough
	sink   *deadletter.FileSink // opened by open
}

// each streams the records f selects (deadletter.ScanFile) and reports
// torn lines to warn. It only reads the file, so list and show are safe
// while an application appends to it.
func (s *fileStore) each(_ context.Context, f deadletter.Filter, fn func(retry.DeadLetter) error) error {
	err := deadletter.ScanFile(s.path, f, fn)
	if tr := (*deadletter.TornRecordError)(nil); errors.As(err, &tr) {
		s.warnTorn(tr)
		return nil
	}
	return err
}

// warnTorn reports torn lines, the first time.
func (s *fileStore) warnTorn(err *deadletter.TornRecordError) {
	if !s.warned {
		s.warned = true
		warn(s.warn, err)
	}
}

func (s *fileStore) get(ctx context.Context, id string) (dl retry.DeadLetter, err error) {
	found := false
	err = s.each(ctx, deadletter.Filter{IDs: []string{id}}, func(d retry.DeadLetter) error {
		dl, found = d, true
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: %s", errNotFound, id)
	}
	return dl, err
}

// purge rewrites the file without the records f selects; see
// deadletter.FileSink.Purge.
func (s *fileStore) purge(ctx context.Context, f deadletter.Filter) (int, error) {
	sink, err := s.open()
	if err != nil {
		return 0, err
	}
	return sink.Purge(ctx, f)
}

func (s *fileStore) source(context.Context) (deadletter.Source, error) {
	return s.open()
}

// open opens the file for writing, once.
func (s *fileStore) open() (*deadletter.FileSink, error) {
	if s.sink != nil {
		return s.sink, nil
	}
	// Redrive or purge of a file that does not exist is a mistake, not a
	// new file.
	if _, err := os.Stat(s.path); err != nil {
		return nil, err
	}
	sink, err := deadletter.OpenFile(s.path, &deadletter.FileOptions{OnTorn: s.warnTorn})
	if err != nil {
		return nil, err
	}
	s.sink = sink
	return sink, nil
}

func (s *fileStore) close() error {
	if s.sink == nil {
		return nil
	}
	return s.sink.Close()
}
