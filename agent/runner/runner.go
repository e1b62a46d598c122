package runner

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
)

// Spec is what a runner is asked to do: the offer's service and parameters.
type Spec struct {
	Service string
	Params  map[string]string
	// Progress, when not nil, receives the runner's own progress as a
	// fraction in 0..1, increasing, from one goroutine at a time; a runner
	// that cannot tell never calls it.
	Progress func(fraction float64)
}

// Runner produces outputPath from inputPath ("" when the job has no input).
// Run returns once the output is complete or ctx is done; a runner must stop
// promptly when ctx ends, because a cancel or a lost lease means the work no
// longer belongs to this device. The caller checks the output's media
// structure, so a runner need not.
type Runner interface {
	Run(ctx context.Context, spec Spec, inputPath, outputPath string) error
}

// Service names of the built-in runners (protocol.Services lists the same).
const (
	ServiceSynthetic    = "synthetic.mp4"
	ServiceH264p720     = "ffmpeg.h264_720p"
	ServiceH264p1080    = "ffmpeg.h264_1080p"
	defaultFFmpegBinary = "ffmpeg"
)

// Builtin returns the built-in runners by service name. ffmpegPath is the
// ffmpeg binary; "" means look it up on PATH when a job runs. clk drives the
// synthetic runner's delay.
func Builtin(clk clock.Clock, ffmpegPath string) map[string]Runner {
	rs, err := ForServices(protocol.Services, Names(protocol.Services), Env{Clock: clk, FFmpeg: ffmpegPath})
	if err != nil {
		panic("runner: the default catalogue names a kind this package lacks: " + err.Error())
	}
	return rs
}

// probeTimeout bounds LookFFmpeg's run of `ffmpeg -version`.
var probeTimeout = 10 * time.Second

// LookFFmpeg resolves the ffmpeg binary: path itself when set, else "ffmpeg"
// on PATH. The agent calls it at start-up when it offers an FFmpeg service,
// so a missing binary is reported once, clearly, instead of failing every job.
func LookFFmpeg(path string) (string, error) {
	p, err := findFFmpeg(path)
	if err != nil {
		return "", err
	}
	// Found is not enough: a broken install (a shared library missing at
	// run time) only shows when the binary runs. A probe killed by its
	// timeout proves nothing (a Mac busy or asleep at start-up, eight agents
	// starting at once on a loaded host: seen in `rendermac fleet`), so only
	// a binary that fails on its own is refused.
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "-version").CombinedOutput()
	if err != nil && ctx.Err() != nil {
		return p, nil
	}
	if err != nil {
		return "", fmt.Errorf("ffmpeg at %s does not run (`%s -version`: %v: %s); the install is broken, reinstall it",
			p, p, err, firstLine(out))
	}
	return p, nil
}

// findFFmpeg resolves the binary without running it. A job uses it, not
// LookFFmpeg: the start-up probe already ran the binary, and a probe with a
// wall-clock timeout run inside a job is killed when the Mac sleeps through
// it, which would fail the job for good (runner_failed) on a sound install.
func findFFmpeg(path string) (string, error) {
	if path == "" {
		path = defaultFFmpegBinary
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("find ffmpeg (install it, e.g. `brew install ffmpeg` or `apt-get install ffmpeg`, or pass its path): %w", err)
	}
	return p, nil
}

// firstLine is the first non-empty line of out, at most 200 bytes.
func firstLine(out []byte) string {
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimSpace(line); line != "" {
			return line[:min(len(line), 200)]
		}
	}
	return "no output"
}
