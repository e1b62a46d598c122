package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	set := newFlagSet("dev", "[--listen ADDR] [--log-level L] [--log-format text|json] [--catalogue FILE] [--ffprobe auto|PATH|off] [--cards DIR]", stderr)
	catalogue := set.String("catalogue", "", "service catalogue file (default: the built-in services); give the agent the same")
	ffprobe := set.String("ffprobe", "auto", "ffprobe for verification profiles: auto, a path, or off")
	listen := set.String("listen", "127.0.0.1:8080", "listen address")
	logLevel := set.String("log-level", "info", "debug, info, warn or error")
	logFormat := set.String("log-format", "text", "text or json")
	cards := set.String("cards", "", "directory of qualification cards (qualify's JSON) the web console's cards page lists, as the server's --cards")
	if err := parseFlags(set, args); err != nil {
		return err
	}
	if *cards != "" && !isDir(*cards) {
		return usageError{fmt.Sprintf("--cards %q is not a directory", *cards)}
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
		leaseTTL: fencing.DefaultLeaseTTL, heartbeat: 15 * time.Second, cardsDir: *cards}
	cfg := f.config(key, log)
	if cfg.Services, err = loadCatalogue(*catalogue); err != nil {
		return err
	}
	if cfg.FFprobe, err = resolveFFprobe(*ffprobe, log); err != nil {
		return err
	}
	self := selfCommand()
	return controlplane.Run(ctx, cfg, func(ctx context.Context, st *controlplane.Plane) error {
		return devWelcome(ctx, st, dir, self, stdout)
	})
}

// selfCommand is how the user's shell runs this binary again, for the
// agent command dev prints: `go run ./cmd/rendermac` when this is a `go
// run` build (see isGoRunBuild), `rendermac` when that name on PATH is this
// file, else this file's path.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "rendermac"
	}
	return selfCommandFor(exe, exec.LookPath, isFile(filepath.Join("cmd", "rendermac", "main.go")))
}

func selfCommandFor(exe string, lookPath func(string) (string, error), inModuleRoot bool) string {
	if isGoRunBuild(exe) {
		if inModuleRoot {
			return "go run ./cmd/rendermac"
		}
		return "go run github.com/rendermac/rendermac/cmd/rendermac" // from anywhere in the module
	}
	if p, err := lookPath("rendermac"); err == nil && sameFile(p, exe) {
		return "rendermac"
	}
	return exe
}

// isGoRunBuild reports whether exe is a binary `go run` built: a temporary
// .../go-buildNNN/bNNN/exe/rendermac, or (Go 1.24 on) one kept in the
// build cache, GOCACHE/XX/HASH-d/rendermac. Neither is a path to print.
func isGoRunBuild(exe string) bool {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) == "exe" && strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return true
	}
	hash, shard := filepath.Base(dir), filepath.Base(filepath.Dir(dir))
	return strings.HasSuffix(hash, "-d") && len(shard) == 2 && strings.HasPrefix(hash, shard)
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// devWelcome creates the demo buyer and pairing code and prints how to use
// them: the agent to start (self runs this binary), a job to submit, and
// how to download its output; the commands need only a shell, curl and sed.
func devWelcome(ctx context.Context, st *controlplane.Plane, dir, self string, stdout io.Writer) error {
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

1. Connect an agent, in another terminal (pairing code single use, valid until %[6]s):
  %[9]s agent --server %[1]s --pair %[7]s --services synthetic.mp4 --slots 2 --work %[2]s/agent --token-file %[2]s/device.json

2. Submit a job and keep its id:
  JOB=$(curl -sS -X POST %[1]s/v1/jobs -H 'Authorization: Bearer %[5]s' -H 'Idempotency-Key: demo-1' -d '{"service":"synthetic.mp4","params":{"seed":"demo"}}' | sed -n 's/^{"id":"\([^"]*\)".*/\1/p'); echo $JOB

3. Watch it until its status is "succeeded" (its attempts, then its output):
  curl -sS -H 'Authorization: Bearer %[5]s' %[1]s/v1/jobs/$JOB
or in the web console, %[1]s/console/ (log in with this operator credential):
  %[8]s

4. Download its output (output.download_url: a signed URL, valid for an hour) to demo.mp4:
  curl -sS -o demo.mp4 "$(curl -sS -H 'Authorization: Bearer %[5]s' %[1]s/v1/jobs/$JOB | sed -n 's/.*"download_url":"\([^"]*\)".*/\1/p' | sed 's/\\u0026/\&/g')"

Press Ctrl-C to stop; everything above is deleted.
`, u, dir, b.id, devBalanceCents, b.apiKey, expires.Format(time.Kitchen+" MST"), code, operator, self)
	return nil
}
