package s3provider

import (
	"context"
	"time"

	"github.com/rendermac/rendermac/internal/localserver"
)

// TB is the part of testing.TB the helpers need (keeps "testing" out of
// non-test binaries).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Bucket is one fresh bucket on a running server, with what a client
// needs to reach it.
type Bucket struct {
	Endpoint, Name, AccessKey, SecretKey, Region string
}

// shared is the process-wide Server (see localserver.Shared).
var shared localserver.Shared[*Server]

// Shared returns the process-wide Server, opening it on first use; a
// failed Open is remembered so every caller fails with one explanation.
func Shared(ctx context.Context) (*Server, error) {
	return shared.Get(ctx, func(ctx context.Context) (*Server, error) { return Open(ctx, Options{}) })
}

// Shutdown closes the shared Server (call it from TestMain after m.Run).
func Shutdown() error { return shared.Shutdown() }

// MustBucket returns a fresh bucket on the shared server. If versitygw
// cannot be had the test fails with Open's explanation; it never skips.
func MustBucket(t TB) Bucket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Shared(ctx)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return s.MustBucket(t)
}

// MustBucket returns a fresh bucket on s, failing the test if it cannot.
func (s *Server) MustBucket(t TB) Bucket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := s.NewBucket(ctx)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return Bucket{Endpoint: s.Endpoint(), Name: name, AccessKey: AccessKey, SecretKey: SecretKey, Region: Region}
}
