//go:build linux

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
)

// serviceComposition is a command-runner service served by the example
// composition renderer (deploy/composition: timecut, chromium, ffmpeg).
const serviceComposition = "composition.title_card"

// The server knows a service from its catalogue (an operator's would name
// it with runner kind "command"); this binary's stacks take the default
// catalogue, which gains the composition service before any test starts.
// Its params are declared as render.js reads them: the server refuses any
// other key at POST /v1/jobs.
func init() {
	protocol.Services = append(protocol.Services, protocol.Service{Name: serviceComposition, PriceCents: 50, Media: "mp4",
		Runner: protocol.RunnerSpec{Kind: protocol.RunnerCommand, Command: []string{"node", "render.js", "{params}", "{output}"}},
		Params: []protocol.ParamSpec{ // sorted by name
			{Name: "background", Type: protocol.ParamString, MaxLen: 7},
			{Name: "duration_s", Type: protocol.ParamInteger, Min: 1, Max: 30},
			{Name: "fps", Type: protocol.ParamInteger, Min: 1, Max: 30},
			{Name: "height", Type: protocol.ParamInteger, Min: 64, Max: 1920},
			{Name: "title", Type: protocol.ParamString, MaxLen: 64},
			{Name: "width", Type: protocol.ParamInteger, Min: 64, Max: 1920},
		}})
}

// compositionRunner is the command runner an operator would configure for
// the example renderer. The test fails, naming the install step, when the
// renderer is not installed (.ci/setup installs it).
func compositionRunner(t *testing.T) *runner.Command {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "deploy", "composition"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "timecut")); err != nil {
		t.Fatalf("the example composition renderer is not installed (%v): cd deploy/composition && "+
			"PUPPETEER_SKIP_CHROMIUM_DOWNLOAD=1 npm ci --ignore-scripts; apt-get install -y chromium ffmpeg nodejs", err)
	}
	c, err := runner.NewCommand(runner.CommandConfig{
		Argv: []string{"node", "render.js", "{params}", "{output}"}, Dir: dir, TimeoutS: 300,
		Params: []string{"title", "duration_s", "fps", "width", "height"},
	})
	require.NoError(t, err)
	require.NoError(t, c.Check())
	return c
}

// compositionStack is a control plane with one agent serving the
// composition service through the command runner.
func compositionStack(t *testing.T) *stack {
	t.Helper()
	c := compositionRunner(t)
	s := newStack(t)
	creds, _ := s.pair(serviceComposition)
	runAgent(t, "agent", creds, agentOptions{services: []string{serviceComposition},
		runners: map[string]runner.Runner{serviceComposition: c}})
	return s
}

// TestCompositionJob: a buyer's composition job goes submit -> lease ->
// render (the real renderer, in its own process group) -> upload -> commit
// -> verification -> succeeded, and the buyer downloads a real MP4.
func TestCompositionJob(t *testing.T) {
	s := compositionStack(t)
	start := time.Now()
	job := s.createJob(serviceComposition, map[string]string{"title": "e2e", "duration_s": "1", "fps": "10",
		"width": "256", "height": "144"}, nil)
	d := s.waitJobWithin(3*time.Minute, job.ID, "terminal", func(d buyer.JobDetail) bool { return d.Status.Terminal() })
	body := s.requireSucceededOutput(d)
	t.Logf("composition job succeeded in %s, output %d bytes", time.Since(start).Round(time.Millisecond), len(body))
	info, err := mp4.Check(bytes.NewReader(body), int64(len(body)))
	require.NoError(t, err)
	require.Positive(t, info.Tracks)
	require.InDelta(t, 1.0, float64(info.Duration)/float64(info.Timescale), 0.2, "a one-second render")
	require.Equal(t, firstTrySucceeded, transitions(s.events(d.ID)))
	s.requireOneSettledHold(d.ID, "captured")
}

// TestCompositionCancelMidRender: the buyer cancels while the renderer runs;
// the agent kills the renderer's process group and fails the attempt with
// buyer_cancelled, which finalizes the cancel.
func TestCompositionCancelMidRender(t *testing.T) {
	s := compositionStack(t)
	job := s.createJob(serviceComposition, map[string]string{"duration_s": "30", "fps": "10"}, nil)
	s.waitAttemptStatus(job.ID, 1, protocol.AttemptRunning)
	_, err := s.buyer.Cancel(context.Background(), job.ID)
	require.NoError(t, err)
	d := s.waitTerminal(job.ID)
	require.Equal(t, protocol.JobCancelled, d.Status, describe(d))
	require.Len(t, d.Attempts, 1, describe(d))
	require.Equal(t, string(protocol.FailBuyerCancelled), d.Attempts[0].FailureCode, describe(d))
	s.requireOneSettledHold(d.ID, "released")
}
