package fleet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// built is the rendermac binary the package's tests run, built once.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// buildBinary builds the rendermac binary the run starts (the harness
// build: fault points and broken variants compiled in, as `make test`
// builds everything), once for the package.
func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		if built.dir, built.err = os.MkdirTemp("", "rendermac-fleet-test-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "rendermac")
		cmd := exec.Command("go", "build", "-tags", "faultpoints,mutations", "-o", built.bin, "./cmd/rendermac")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build rendermac: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// realProcesses skips under -short (what says what the test starts), and
// returns the binary, a buffer for the run's log and an 8-minute context.
func realProcesses(t *testing.T, what string) (string, *bytes.Buffer, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	return bin, new(bytes.Buffer), ctx
}

// TestShortFleetRunPassesWithEveryFaultKind runs the real binaries: two
// gateways, two agents, every fault kind at least once, then every check.
func TestShortFleetRunPassesWithEveryFaultKind(t *testing.T) {
	bin, log, ctx := realProcesses(t, "starts Postgres, two servers and two agents")
	// The drain bound here is a loaded CI machine's (make test runs every
	// package at once under -race on two cores): the queue must still
	// drain, but the tight bound is rendermac fleet's and qualify's.
	rep, err := Run(ctx, Config{Bin: bin, Duration: 25 * time.Second, Seed: 7, Agents: 2, Gateways: 2, Rate: 3,
		FaultEvery: 500 * time.Millisecond, FFmpegPercent: 5, DrainBound: 4 * time.Minute, Log: log})
	if err != nil {
		t.Fatalf("fleet run: %v\n%s", err, log.String())
	}
	var table bytes.Buffer
	if err := rep.PrintTable(&table); err != nil {
		t.Fatal(err)
	}
	if n := rep.Violations(); n > 0 {
		t.Fatalf("%d violations; replay: go run -tags faultpoints,mutations ./cmd/rendermac fleet --seed 7 --duration 25s --agents 2 --fault-every 500ms --ffmpeg-percent 5 --drain-bound 4m\n%s\n%s",
			n, table.String(), log.String())
	}
	if rep.Soak.Succeeded == 0 || rep.Accepted == 0 {
		t.Fatalf("nothing ran:\n%s", table.String())
	}
	for _, k := range FaultKinds() {
		if rep.Faults[k] == 0 && rep.NotInjected(k) == "" {
			t.Errorf("fault %s never injected:\n%s", k, table.String())
		}
	}
	t.Logf("%s", table.String())
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
