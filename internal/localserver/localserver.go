// Package localserver holds what the providers of locally started servers
// (internal/pgprovider's Postgres, internal/s3provider's versitygw) and
// the harnesses that start server processes share: a free loopback port,
// and one lazily opened server per process that TestMain closes.
package localserver

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
)

// FreePort returns a loopback TCP port that was free a moment ago (the
// kernel picked it for a listener this closed); a server started on it
// may still lose it to another process, which its start then reports.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr is FreePort as "127.0.0.1:PORT".
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(p), nil
}

// Shared is one process-wide server, opened on first use. A mutex rather
// than sync.Once so that Shutdown can reset it; a failed open is
// remembered, so every caller fails fast with the same explanation instead
// of trying again. The zero value is ready to use.
type Shared[T io.Closer] struct {
	mu   sync.Mutex
	done bool
	v    T
	err  error
}

// Get returns the shared server, calling open on first use (and after a
// Shutdown).
func (s *Shared[T]) Get(ctx context.Context, open func(context.Context) (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.v, s.err = open(ctx)
		s.done = true
	}
	return s.v, s.err
}

// Set replaces what Get returns until the next Shutdown (tests that need
// a failing provider), and returns a function that restores the previous
// state.
func (s *Shared[T]) Set(v T, err error) (restore func()) {
	s.mu.Lock()
	done, was, wasErr := s.done, s.v, s.err
	s.done, s.v, s.err = true, v, err
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.done, s.v, s.err = done, was, wasErr
		s.mu.Unlock()
	}
}

// Shutdown closes the shared server, if one was opened, and resets s.
func (s *Shared[T]) Shutdown() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, opened := s.v, s.done && s.err == nil
	var zero T
	s.done, s.v, s.err = false, zero, nil
	if !opened {
		return nil
	}
	return v.Close()
}
