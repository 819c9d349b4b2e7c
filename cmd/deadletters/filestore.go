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
	path string
	warn io.Writer
	sink *deadletter.FileSink // opened by open
}

// read returns every record of the file, reporting torn lines to warn. It
// only reads the file, so list and show are safe while an application
// appends to it.
func (s *fileStore) read() ([]retry.DeadLetter, error) {
	recs, err := deadletter.ReadFile(s.path)
	if tr := (*deadletter.TornRecordError)(nil); errors.As(err, &tr) {
		fmt.Fprintf(s.warn, "deadletters: warning: %v\n", err)
		return recs, nil
	}
	return recs, err
}

func (s *fileStore) list(_ context.Context, f deadletter.Filter) ([]retry.DeadLetter, error) {
	recs, err := s.read()
	if err != nil {
		return nil, err
	}
	return f.Select(recs)
}

func (s *fileStore) get(_ context.Context, id string) (retry.DeadLetter, error) {
	recs, err := s.read()
	if err != nil {
		return retry.DeadLetter{}, err
	}
	for _, dl := range recs {
		if dl.ID == id {
			return dl, nil
		}
	}
	return retry.DeadLetter{}, fmt.Errorf("%w: %s", errNotFound, id)
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
	sink, err := deadletter.OpenFile(s.path, nil)
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
