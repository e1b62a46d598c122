package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// FFmpeg parameter limits and defaults.
const (
	crfMin, crfMax, crfDefault               = 18, 35, 23
	durationMinS, durationMaxS, durationDefS = 1, 60, 5
	defaultPreset                            = "medium"
	// stderrTailBytes is how much of ffmpeg's stderr an error carries: enough
	// for its last complaint, bounded so a chatty failure cannot flood a fail
	// message (the wire allows 4096 bytes).
	stderrTailBytes = 1024
	// killGrace bounds how long Run waits for ffmpeg's pipes after the
	// process was killed on cancel.
	killGrace = 5 * time.Second
)

// presets is the allow-list of x264 presets; slower ones are refused because
// a job's lease must be renewable within the time a buyer is charged for.
var presets = []string{"ultrafast", "veryfast", "fast", "medium"}

// inputFormats are the demuxers ffmpeg may use on a downloaded input. The
// input is untrusted: playlist and concat demuxers (hls, concat, image2...)
// would let a crafted file make ffmpeg read other local files or URLs.
const inputFormats = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,flv"

// FFmpeg encodes H.264 MP4 at a fixed height with a fixed argument template.
//
// Parameters: crf (integer 18..35, default 23), preset (ultrafast, veryfast,
// fast or medium, default medium) and duration_s (1..60): the length of the
// built-in test pattern rendered when the job has no input (default 5), or a
// cap on the output's length when it has one.
type FFmpeg struct {
	// Path is the ffmpeg binary; "" means "ffmpeg" on PATH.
	Path string
	// Width and Height are the output frame size (the test pattern's size;
	// inputs are scaled to Height keeping their aspect ratio).
	Width, Height int
}

// FFmpegParams are the FFmpeg services' validated parameters.
type FFmpegParams struct {
	CRF       int
	Preset    string
	DurationS int
	// DurationSet records that duration_s was given, so that an input is
	// only cut when the buyer asked for it.
	DurationSet bool
}

// ParseFFmpegParams validates params for an FFmpeg service.
func ParseFFmpegParams(params map[string]string) (FFmpegParams, error) {
	var p FFmpegParams
	if err := checkKnown(params, "crf", "preset", "duration_s"); err != nil {
		return p, err
	}
	var err error
	if p.CRF, err = intParam(params, "crf", crfMin, crfMax, crfDefault); err != nil {
		return p, err
	}
	if p.Preset, err = enumParam(params, "preset", presets, defaultPreset); err != nil {
		return p, err
	}
	if p.DurationS, err = intParam(params, "duration_s", durationMinS, durationMaxS, durationDefS); err != nil {
		return p, err
	}
	_, p.DurationSet = params["duration_s"]
	return p, nil
}

// Args is the complete argument vector (without the binary) for one job.
// Only validated values and the agent's own absolute paths vary, and every
// path is absolute, so none can be mistaken for an option.
func (f FFmpeg) Args(p FFmpegParams, inputPath, outputPath string) ([]string, error) {
	if f.Width <= 0 || f.Height <= 0 {
		return nil, fmt.Errorf("ffmpeg runner: frame size %dx%d is not configured", f.Width, f.Height)
	}
	if !filepath.IsAbs(outputPath) || (inputPath != "" && !filepath.IsAbs(inputPath)) {
		return nil, errors.New("ffmpeg runner: input and output paths must be absolute")
	}
	args := []string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y"}
	if inputPath == "" {
		src := fmt.Sprintf("testsrc2=size=%dx%d:rate=30:duration=%d", f.Width, f.Height, p.DurationS)
		args = append(args, "-f", "lavfi", "-i", src)
	} else {
		args = append(args, "-protocol_whitelist", "file", "-format_whitelist", inputFormats, "-i", inputPath)
		if p.DurationSet {
			args = append(args, "-t", strconv.Itoa(p.DurationS))
		}
		args = append(args, "-vf", "scale=-2:"+strconv.Itoa(f.Height), "-c:a", "aac", "-b:a", "128k")
	}
	args = append(args, "-c:v", "libx264", "-preset", p.Preset, "-crf", strconv.Itoa(p.CRF),
		"-pix_fmt", "yuv420p", "-movflags", "+faststart", "-f", "mp4", outputPath)
	return args, nil
}

// Run validates the parameters and runs ffmpeg with an explicit argv (no
// shell). ctx ending kills the process.
func (f FFmpeg) Run(ctx context.Context, spec Spec, inputPath, outputPath string) error {
	p, err := ParseFFmpegParams(spec.Params)
	if err != nil {
		return err
	}
	args, err := f.Args(p, inputPath, outputPath)
	if err != nil {
		return err
	}
	bin, err := findFFmpeg(f.Path)
	if err != nil {
		return err
	}
	if err := runFFmpeg(ctx, bin, args); err != nil {
		return fmt.Errorf("ffmpeg: %w", err)
	}
	return nil
}

// errStopped marks a run that ctx ended: not ffmpeg's failure.
var errStopped = errors.New("ffmpeg stopped")

// runFFmpeg runs bin with args (no shell); an error carries the tail of
// ffmpeg's stderr, or is errStopped with ctx's cause when ctx ended.
func runFFmpeg(ctx context.Context, bin string, args []string) error {
	var stderr tailBuffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = &stderr
	cmd.WaitDelay = killGrace
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", errStopped, context.Cause(ctx))
		}
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.buf))
	}
	return nil
}

// tailBuffer keeps the last stderrTailBytes written to it.
type tailBuffer struct{ buf []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}
