package targets

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// TemplateName is the migrated template database every harness database is
// cloned from.
const TemplateName = "rendermac_template"

// WorkersPerCPU is how many sequences a campaign against Postgres runs at
// once per CPU by default: a run waits on round trips more than it
// computes, so one worker per CPU leaves the CPUs idle between statements.
const WorkersPerCPU = 4

// campaignSessions turns synchronous_commit off in the sessions of a campaign
// worker's pools, so a commit returns once its WAL is written to the
// server's buffers rather than flushed. That decides only what a Postgres
// crash would lose; no campaign crashes Postgres (its faults are at the
// protocol level), and a committed transaction is visible to every later
// statement either way, so no reply or row a campaign compares can differ
// (docs/semantics.md, "Campaign comparisons"). Against a DATABASE_URL
// server with fsync on it saves a disk flush per write transaction.
//
// It also has those sessions keep one generic plan per prepared statement.
// The scoped audit's statements take the previous snapshot as arguments
// (store.Scope), and for those Postgres chose a custom plan at every call:
// 0.6 ms of planning each, two per step. A plan never changes a result.
func campaignSessions(cfg *pgxpool.Config) *pgxpool.Config {
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	return cfg
}

// openCampaignPool opens store.OpenPool's pool with campaignSessions.
func openCampaignPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := store.PoolConfig(url)
	if err != nil {
		return nil, err
	}
	return store.OpenPoolConfig(ctx, campaignSessions(cfg))
}

// Postgres is a provider plus a migrated template: where the harness gets
// its databases.
type Postgres struct {
	Provider *pgprovider.Provider
}

// OpenPostgres opens a provider (url, else DATABASE_URL, else an embedded
// cluster from local binaries, else Docker) and migrates the template. It
// logs which Postgres it uses to log.
func OpenPostgres(ctx context.Context, url string, log io.Writer) (*Postgres, error) {
	p, err := pgprovider.Open(ctx, pgprovider.Options{URL: url})
	if err != nil {
		return nil, err
	}
	if err := p.Template(ctx, TemplateName, store.Migrate); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("migrate template: %w", err)
	}
	version, _ := p.Version(ctx)
	fmt.Fprintf(log, "postgres: %s (%s)\n", p.Kind(), version)
	return &Postgres{Provider: p}, nil
}

// NewDatabase clones a fresh migrated database.
func (p *Postgres) NewDatabase(ctx context.Context) (string, error) {
	return p.Provider.NewDatabase(ctx, TemplateName)
}

// NewWorkerDatabase is NewDatabase for a campaign worker: the clone's URL
// over the embedded cluster's Unix-domain socket where it has one
// (pgprovider's SocketURL), since a worker's every step is a few small
// statements and their round trips. Nothing in a campaign needs the TCP
// endpoint (no proxy sits in front of a worker's database).
func (p *Postgres) NewWorkerDatabase(ctx context.Context) (string, error) {
	url, err := p.NewDatabase(ctx)
	if err != nil {
		return "", err
	}
	return p.Provider.SocketURL(url), nil
}

// Close stops an embedded cluster and drops what was created.
func (p *Postgres) Close() error { return p.Provider.Close() }

// ServerVariants lists the service layer's deliberately broken variants.
func ServerVariants() []fencing.Variant {
	return fencing.Variants()
}

// artifactScratch makes a campaign worker's artifact directory: in memory
// (/dev/shm) where there is one, else in the temporary directory. A
// campaign's store is unsynced and its files die with the run, so only the
// file system calls differ: creating, linking and removing an output's
// files on a disk file system cost a fifth of a model-vs-Postgres
// campaign's own CPU (the journal's work, not the bytes).
func artifactScratch(pattern string) (string, error) {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", pattern); err == nil {
			return dir, nil
		}
	}
	return os.MkdirTemp("", pattern)
}
