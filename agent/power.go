package agent

import (
	"context"
	"log/slog"
	"os/exec"
	"strconv"
	"sync"

	"github.com/rendermac/rendermac/agent/runner"
)

// PowerCommand is the program that keeps the machine from idle-sleeping
// while process pid lives, on goos: on macOS `caffeinate -i -w PID` (an
// idle-sleep assertion that also ends if the agent dies); elsewhere nil,
// nothing to hold.
func PowerCommand(goos string, pid int) []string {
	if goos == "darwin" {
		return []string{"caffeinate", "-i", "-w", strconv.Itoa(pid)}
	}
	return nil
}

// StartProcess starts argv and returns what stops it (kill, then wait).
type StartProcess func(argv []string) (stop func(), err error)

// ExecProcess is StartProcess with os/exec.
func ExecProcess(argv []string) (func(), error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}, nil
}

// PowerAssertion holds the power command while at least one hold is open:
// the first Hold starts it, the last release stops it. A nil command makes
// it a no-op. Safe for concurrent use (slots run attempts at once).
type PowerAssertion struct {
	argv  []string
	start StartProcess
	log   *slog.Logger

	mu    sync.Mutex
	holds int
	stop  func()
}

// NewPowerAssertion returns an assertion running argv through start; log
// (nil: discarded) hears when it cannot be taken.
func NewPowerAssertion(argv []string, start StartProcess, log *slog.Logger) *PowerAssertion {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PowerAssertion{argv: argv, start: start, log: log}
}

// Hold opens a hold and returns its release (idempotent). An assertion
// that cannot be taken is logged, not fatal: the attempt still runs.
func (p *PowerAssertion) Hold() (release func()) {
	if len(p.argv) == 0 {
		return func() {}
	}
	p.mu.Lock()
	p.holds++
	if p.holds == 1 {
		stop, err := p.start(p.argv)
		if err != nil {
			p.log.Warn("power assertion not taken: the Mac may idle-sleep mid-render", "command", p.argv, "err", err)
			stop = func() {}
		}
		p.stop = stop
	}
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.holds--; p.holds == 0 {
				p.stop()
				p.stop = nil
			}
		})
	}
}

// KeepAwake wraps each runner so that the assertion is held while it runs.
func KeepAwake(runners map[string]runner.Runner, p *PowerAssertion) map[string]runner.Runner {
	out := make(map[string]runner.Runner, len(runners))
	for name, r := range runners {
		out[name] = awakeRunner{r, p}
	}
	return out
}

type awakeRunner struct {
	runner.Runner
	p *PowerAssertion
}

func (r awakeRunner) Run(ctx context.Context, spec runner.Spec, inputPath, outputPath string) error {
	defer r.p.Hold()()
	return r.Runner.Run(ctx, spec, inputPath, outputPath)
}
