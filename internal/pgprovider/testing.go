package pgprovider

import (
	"context"
	"time"

	"github.com/rendermac/rendermac/internal/localserver"
)

// TB is the part of testing.TB the helpers need. Declaring it here keeps
// the "testing" package (and its flags) out of non-test binaries such as
// the CLI, and lets the fault harness pass its own implementation.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	Logf(format string, args ...any)
}

// shared is the process-wide Provider (see localserver.Shared: a failed
// Open is remembered so every test fails fast with the same explanation
// instead of re-probing).
var shared localserver.Shared[*Provider]

// Shared returns the process-wide Provider, opening it with the zero
// Options on first use.
func Shared(ctx context.Context) (*Provider, error) {
	return shared.Get(ctx, func(ctx context.Context) (*Provider, error) { return Open(ctx, Options{}) })
}

// Shutdown closes the shared Provider. Call it from TestMain after m.Run:
// without it the cluster dies with the process (Pdeathsig) but its temp dir
// is only reclaimed by a later run.
func Shutdown() error { return shared.Shutdown() }

// MustDatabase returns the URL of a fresh database cloned from template and
// drops it when the test ends. If migrate is non-nil, template is first
// created with it (once per process, see Provider.Template); with nil,
// template must already exist.
//
// If no PostgreSQL can be had the test fails with Open's explanation. It
// never skips: a skipped database test reads as a pass in CI.
func MustDatabase(t TB, template string, migrate func(ctx context.Context, url string) error) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := Shared(ctx)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if migrate != nil {
		if err := p.Template(ctx, template, migrate); err != nil {
			t.Fatalf("%v", err)
		}
	}
	url, err := p.NewDatabase(ctx, template)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Only logged: a test that stopped the server on purpose should
		// not fail here; the database goes away with the cluster, or (env
		// mode) is dropped by Close.
		if err := p.DropDatabase(ctx, url); err != nil {
			t.Logf("%v", err)
		}
	})
	return url
}
