package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// DefaultFrameTimeout bounds every wait of a scenario for a frame, a fault
// point or a readiness probe.
const DefaultFrameTimeout = 5 * time.Second

// EnvOptions select the stack the catalogue runs against.
type EnvOptions struct {
	// ServerVariant runs a deliberately broken service layer.
	ServerVariant fencing.Variant
	// HarnessVariant runs a harness-level broken variant (see
	// harnessVariants); "" none.
	HarnessVariant string
	// FrameTimeout bounds each wait (default DefaultFrameTimeout). Broken
	// variant runs may lower it: their expected frame never comes.
	FrameTimeout time.Duration
	// ArtifactsS3 runs every scenario with its artifacts in a bucket of a
	// real S3 server (a versitygw process of its own, which `store down`
	// stops) and presigned grants; steps marked store=fs are skipped and
	// store=s3 ones run.
	ArtifactsS3 bool
	// Log, when set, receives every gateway and API log line as text.
	Log io.Writer
}

// Env is where scenarios run: the shared Postgres that gives every scenario
// a fresh database, plus, created on first need, a dedicated local cluster
// for the scenarios that stop Postgres (so nothing else sharing the shared
// one is affected). An Env runs one scenario at a time.
type Env struct {
	pg   *targets.Postgres
	opts EnvOptions

	runMu sync.Mutex // RunScenario holds it: fault points are process-global

	dedMu     sync.Mutex
	dedicated *targets.Postgres
}

// NewEnv returns an Env over pg (from OpenPostgres).
func NewEnv(ctx context.Context, pg *targets.Postgres, opts EnvOptions) (*Env, error) {
	if pg == nil || pg.Provider == nil {
		return nil, errors.New("scenarios: NewEnv needs a Postgres (see targets.OpenPostgres)")
	}
	if opts.HarnessVariant != "" && harnessVariants[opts.HarnessVariant] == "" {
		return nil, fmt.Errorf("scenarios: unknown harness variant %q", opts.HarnessVariant)
	}
	if opts.FrameTimeout <= 0 {
		opts.FrameTimeout = DefaultFrameTimeout
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &Env{pg: pg, opts: opts}, nil
}

// Options returns the options the Env runs with.
func (e *Env) Options() EnvOptions { return e.opts }

// Close stops the dedicated cluster, if one was started. The shared
// Postgres belongs to the caller.
func (e *Env) Close() error {
	e.dedMu.Lock()
	defer e.dedMu.Unlock()
	if e.dedicated == nil {
		return nil
	}
	err := e.dedicated.Close()
	e.dedicated = nil
	return err
}

// dedicatedPostgres returns the Env's own fault-controllable cluster,
// starting it on first use: a local ephemeral cluster, never DATABASE_URL
// or Docker, because those cannot be stopped and started on the same port.
func (e *Env) dedicatedPostgres(ctx context.Context) (*targets.Postgres, error) {
	e.dedMu.Lock()
	defer e.dedMu.Unlock()
	if e.dedicated != nil {
		// A scenario that failed half-way may have left it stopped.
		if err := e.dedicated.Provider.Start(ctx); err != nil {
			return nil, err
		}
		return e.dedicated, nil
	}
	p, err := pgprovider.Open(ctx, pgprovider.Options{IgnoreEnv: true, DisableDocker: true})
	if err != nil {
		return nil, fmt.Errorf("dedicated postgres (needs local PostgreSQL server binaries): %w", err)
	}
	if err := p.Template(ctx, targets.TemplateName, store.Migrate); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("dedicated postgres: migrate template: %w", err)
	}
	e.dedicated = &targets.Postgres{Provider: p}
	return e.dedicated, nil
}
