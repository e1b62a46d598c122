//go:build linux

package runner

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/clock"
)

// The command runner is proven with a real open-source composition renderer:
// deploy/composition, timecut (BSD-3-Clause) driving Debian's chromium and
// ffmpeg. These tests never skip: without the renderer they fail, naming the
// install step (.ci/setup performs it).

const compositionInstall = "cd deploy/composition && PUPPETEER_SKIP_CHROMIUM_DOWNLOAD=1 npm ci --ignore-scripts; apt-get install -y chromium ffmpeg nodejs"

// compositionDir returns deploy/composition after checking that everything
// the renderer needs is installed.
func compositionDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "deploy", "composition"))
	require.NoError(t, err)
	for _, bin := range []string{"node", "ffmpeg", chromiumPath()} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("the composition renderer needs %s, which is missing (%v); install it: %s", bin, err, compositionInstall)
		}
	}
	for _, mod := range []string{"timecut", "puppeteer"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", mod, "package.json")); err != nil {
			t.Fatalf("the composition renderer's npm packages are not installed (%v); install them: %s", err, compositionInstall)
		}
	}
	return dir
}

func chromiumPath() string {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// compositionCommand is the runner an operator would configure for the
// example renderer, with a marker in its environment that every process it
// starts inherits (even one that left its process group).
func compositionCommand(t *testing.T, timeoutS int) (*Command, string) {
	t.Helper()
	marker := "RENDERMAC_TEST_RUN=" + strconv.FormatInt(time.Now().UnixNano(), 36) + t.Name()
	c, err := NewCommand(CommandConfig{
		Argv:     []string{"node", "render.js", "{params}", "{output}"},
		Dir:      compositionDir(t),
		Env:      []string{"CHROMIUM_PATH=" + chromiumPath(), marker},
		TimeoutS: timeoutS,
		Params:   []string{"title", "background", "duration_s", "fps", "width", "height"},
	})
	require.NoError(t, err)
	require.NoError(t, c.Check())
	return c, marker
}

type probeJSON struct {
	Streams []struct {
		CodecType string `json:"codec_type"`
		CodecName string `json:"codec_name"`
		Width     int    `json:"width"`
		Height    int    `json:"height"`
		PixFmt    string `json:"pix_fmt"`
		NbFrames  string `json:"nb_frames"`
	} `json:"streams"`
	Format struct {
		FormatName string `json:"format_name"`
		Duration   string `json:"duration"`
	} `json:"format"`
}

func ffprobe(t *testing.T, path string) probeJSON {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-print_format", "json", "-show_streams", "-show_format", path).Output()
	require.NoError(t, err, "ffprobe %s", path)
	var s probeJSON
	require.NoError(t, json.Unmarshal(out, &s))
	return s
}

func TestCompositionRendererRendersAnMP4(t *testing.T) {
	t.Parallel()
	c, marker := compositionCommand(t, 300)
	out := filepath.Join(t.TempDir(), "output.mp4")
	var mu sync.Mutex
	var seen []float64
	spec := Spec{Service: "composition.title_card", Params: map[string]string{
		"title": "RenderMac CI", "background": "#264653", "duration_s": "2", "fps": "12", "width": "320", "height": "180"},
		Progress: func(f float64) { mu.Lock(); seen = append(seen, f); mu.Unlock() }}
	start := time.Now()
	require.NoError(t, c.Run(t.Context(), spec, "", out))
	took := time.Since(start)

	info := checkFile(t, out)
	require.Positive(t, info.Tracks)
	p := ffprobe(t, out)
	require.Len(t, p.Streams, 1)
	v := p.Streams[0]
	require.Equal(t, "video", v.CodecType)
	require.Equal(t, "h264", v.CodecName)
	require.Equal(t, [2]int{320, 180}, [2]int{v.Width, v.Height})
	require.Equal(t, "24", v.NbFrames, "2 s at 12 fps")
	d, err := strconv.ParseFloat(p.Format.Duration, 64)
	require.NoError(t, err)
	require.InDelta(t, 2.0, d, 0.1)

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(seen), 10, "progress per frame: %v", seen)
	require.InDelta(t, 1.0, seen[len(seen)-1], 1e-9)
	require.Empty(t, processesWithEnv(marker), "the renderer left a process running")
	t.Logf("rendered %s in %s: %s %s %dx%d %s frames, %.3fs, %d progress reports",
		spec.Service, took.Round(time.Millisecond), p.Format.FormatName, v.CodecName, v.Width, v.Height, v.NbFrames, d, len(seen))
}

// The renderer's own check of its params fails the job with its message.
func TestCompositionRendererBadParamIsAFailure(t *testing.T) {
	t.Parallel()
	c, _ := compositionCommand(t, 120)
	err := c.Run(t.Context(), Spec{Params: map[string]string{"width": "321"}}, "", filepath.Join(t.TempDir(), "o.mp4"))
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "exit", ce.Reason)
	require.Equal(t, 2, ce.ExitCode)
	require.Contains(t, ce.Output, "param width: must be an even integer 64..1920")
}

// The time limit reached mid-render kills node, chromium and ffmpeg: no
// process carrying the run's environment is left. The stub clock is moved
// once the renderer reports its first frame, so the browser is running.
func TestCompositionRendererTimeoutLeavesNoProcess(t *testing.T) {
	t.Parallel()
	c, marker := compositionCommand(t, 60)
	stub := clock.NewStub(time.Unix(0, 0))
	c.Clock = stub
	progressed, done := runAsync(t.Context(), c, map[string]string{"duration_s": "30"}, filepath.Join(t.TempDir(), "o.mp4"))
	awaitProgress(t, progressed, done, 120*time.Second)
	require.NotEmpty(t, processesWithEnv(marker))
	require.Eventually(t, func() bool { return stub.Waiters() == 1 }, 10*time.Second, time.Millisecond)
	stub.Advance(60 * time.Second)
	stopping := time.Now()
	// node stops chromium and ffmpeg on SIGTERM by itself; if it did not,
	// the grace timer (the next waiter) would lead to SIGKILL.
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		stub.Advance(killGrace)
		err = <-done
	}
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.Timeout(), "%v", err)
	t.Logf("renderer stopped %s after the time limit", time.Since(stopping).Round(time.Millisecond))
	require.Eventually(t, func() bool { return len(processesWithEnv(marker)) == 0 }, 5*time.Second, 50*time.Millisecond,
		"processes of the timed-out render outlived it: %v", processesWithEnv(marker))
}

// A cancel mid-render (the buyer cancelled, the lease was lost) stops the
// renderer the same way.
func TestCompositionRendererCancelLeavesNoProcess(t *testing.T) {
	t.Parallel()
	c, marker := compositionCommand(t, 300)
	ctx, cancel := context.WithCancelCause(t.Context())
	progressed, done := runAsync(ctx, c, map[string]string{"duration_s": "30"}, filepath.Join(t.TempDir(), "o.mp4"))
	awaitProgress(t, progressed, done, 120*time.Second)
	cause := context.DeadlineExceeded
	cancel(cause)
	require.ErrorIs(t, <-done, cause)
	require.Eventually(t, func() bool { return len(processesWithEnv(marker)) == 0 }, 5*time.Second, 50*time.Millisecond,
		"processes of the cancelled render outlived it: %v", processesWithEnv(marker))
}
