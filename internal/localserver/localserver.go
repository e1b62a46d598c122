// Package localserver holds what the providers of locally started servers
// (internal/pgprovider's Postgres, internal/s3provider's versitygw) and
// the harnesses that start server processes share: a free loopback port,
// and one lazily opened server per process that TestMain closes.
package localserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// Binary is a server program a provider starts: its name, the environment
// variable that may name its path, the command that installs it, and the
// error FindBin wraps when it is nowhere.
type Binary struct {
	Name, Env, Install string
	NotFound           error
}

// FindBin returns the first executable b it finds: explicit (when set, the
// only place looked), $ENV, PATH, $GOBIN, $(go env GOPATH)/bin and
// $HOME/go/bin, in that order; else an error wrapping b.NotFound that says
// where it looked and how to install it.
func FindBin(b Binary, explicit string) (string, error) {
	var tried []string
	try := func(path string) bool {
		if path == "" {
			return false
		}
		tried = append(tried, path)
		fi, err := os.Stat(path)
		return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
	}
	if explicit != "" {
		if try(explicit) {
			return explicit, nil
		}
		return "", fmt.Errorf("%w: %s is not an executable file", b.NotFound, explicit)
	}
	if env := os.Getenv(b.Env); env != "" {
		if try(env) {
			return env, nil
		}
		return "", fmt.Errorf("%w: %s=%s is not an executable file", b.NotFound, b.Env, env)
	}
	if p, err := exec.LookPath(b.Name); err == nil {
		return p, nil
	}
	tried = append(tried, "$PATH")
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) == 2 {
			dirs = append(dirs, strings.TrimSpace(lines[0]), filepath.Join(strings.TrimSpace(lines[1]), "bin"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		if p := filepath.Join(d, b.Name); d != "" && try(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (looked in %s); install it with `%s` or set %s to its path",
		b.NotFound, strings.Join(tried, ", "), b.Install, b.Env)
}

// LogTail is the last 2,000 bytes of a server's log file, trimmed, for an
// error saying why it did not come up ("" when it cannot be read).
func LogTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
