package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/console"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/fencing"
)

// Demo data of `rendermac dev`.
const (
	devBalanceCents = 100_000
	devPairTTL      = time.Hour
)

// runDev runs a throwaway control plane: an embedded Postgres from local
// binaries, a fresh signing key and artifact store in a temp dir, the
// server, and a demo buyer and pairing code, with instructions for
// connecting an agent and submitting a job. Ctrl-C stops and removes it all.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	set := newFlagSet("dev", "[--listen ADDR] [--log-level L] [--log-format text|json] [--catalogue FILE] [--ffprobe auto|PATH|off]", stderr)
	catalogue := set.String("catalogue", "", "service catalogue file (default: the built-in services); give the agent the same")
	ffprobe := set.String("ffprobe", "auto", "ffprobe for verification profiles: auto, a path, or off")
	listen := set.String("listen", "127.0.0.1:8080", "listen address")
	logLevel := set.String("log-level", "info", "debug, info, warn or error")
	logFormat := set.String("log-format", "text", "text or json")
	if err := parseFlags(set, args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "rendermac-dev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Local binaries only: dev must not grab the DATABASE_URL database or
	// wait for a Docker engine.
	pg, err := pgprovider.Open(ctx, pgprovider.Options{IgnoreEnv: true, DisableDocker: true})
	if err != nil {
		return err
	}
	defer pg.Close()
	keyFile := filepath.Join(dir, "signing.key")
	if err := writeSigningKey(keyFile); err != nil {
		return err
	}
	key, err := loadSigningKey(keyFile)
	if err != nil {
		return err
	}
	f := serverFlags{db: pg.AdminURL(), listen: *listen, artifacts: filepath.Join(dir, "artifacts"), keyFile: keyFile,
		leaseTTL: fencing.DefaultLeaseTTL, heartbeat: 15 * time.Second}
	cfg := f.config(key, log)
	if cfg.Services, err = loadCatalogue(*catalogue); err != nil {
		return err
	}
	if cfg.FFprobe, err = resolveFFprobe(*ffprobe, log); err != nil {
		return err
	}
	return controlplane.Run(ctx, cfg, func(ctx context.Context, st *controlplane.Plane) error {
		return devWelcome(ctx, st, dir, stdout)
	})
}

// devWelcome creates the demo buyer and pairing code and prints how to use them.
func devWelcome(ctx context.Context, st *controlplane.Plane, dir string, stdout io.Writer) error {
	b, err := createBuyer(ctx, st.Pool, protocol.UUIDFrom(rand.Reader), "demo buyer", devBalanceCents, "")
	if err != nil {
		return err
	}
	code, expires, err := api.CreatePairingCode(ctx, st.Pool, time.Time{}, devPairTTL)
	if err != nil {
		return err
	}
	_, operator, err := console.CreateOperator(ctx, st.Pool, "dev operator")
	if err != nil {
		return err
	}
	u := st.BaseURL
	fmt.Fprintf(stdout, `
RenderMac dev server at %[1]s (throwaway Postgres and artifacts in %[2]s)

Demo buyer %[3]s, balance %[4]d cents, API key:
  %[5]s

Connect an agent (pairing code single use, valid until %[6]s):
  rendermac agent --server %[1]s --pair %[7]s --services synthetic.mp4 --slots 2 --work %[2]s/agent --token-file %[2]s/device.json

Submit a job:
  curl -sS -X POST %[1]s/v1/jobs -H 'Authorization: Bearer %[5]s' -H 'Idempotency-Key: demo-1' -d '{"service":"synthetic.mp4","params":{"seed":"demo"}}'

Watch it:
  curl -sS -H 'Authorization: Bearer %[5]s' %[1]s/v1/jobs
or in the web console, %[1]s/console/ (log in with this operator credential):
  %[8]s

Press Ctrl-C to stop; everything above is deleted.
`, u, dir, b.id, devBalanceCents, b.apiKey, expires.Format(time.Kitchen+" MST"), code, operator)
	return nil
}
