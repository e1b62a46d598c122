package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Defaults of a Prober.
const (
	DefaultTimeout = 20 * time.Second
	// maxOutputBytes caps ffprobe's JSON: a file with a million streams
	// must not make the server buffer a gigabyte of it.
	maxOutputBytes = 1 << 20
	// probeSizeBytes and analyzeDurationUs bound what ffprobe reads and
	// decodes to find the streams (its memory).
	probeSizeBytes    = 32 << 20
	analyzeDurationUs = 10_000_000
	killGrace         = 2 * time.Second
	mp4Formats        = "mov,mp4,m4a,3gp,3g2,mj2"
)

// Prober runs ffprobe.
type Prober struct {
	// Path is the ffprobe binary ("" means ffprobe on PATH).
	Path string
	// Timeout bounds one run (0: DefaultTimeout).
	Timeout time.Duration
}

// Stream is what a profile checks of one stream.
type Stream struct {
	CodecType string `json:"codec_type"`
	CodecName string `json:"codec_name"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
	Tags      struct {
		Encoder string `json:"encoder"`
	} `json:"tags"`
}

// Result is ffprobe's view of a file.
type Result struct {
	Container string
	DurationS float64
	Streams   []Stream
}

// Video returns the video streams.
func (r Result) Video() []Stream {
	var out []Stream
	for _, s := range r.Streams {
		if s.CodecType == "video" {
			out = append(out, s)
		}
	}
	return out
}

// Encoder is the encoder the first video stream's tag names (libx264,
// hevc_videotoolbox...), without libavcodec's version prefix; "" when the
// file does not say.
func (r Result) Encoder() string {
	v := r.Video()
	if len(v) == 0 {
		return ""
	}
	f := strings.Fields(v[0].Tags.Encoder)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// ErrUnreadable wraps an ffprobe refusal of the file: a verdict, not an
// outage.
var ErrUnreadable = errors.New("ffprobe cannot read the file")

// Probe runs ffprobe on path. A file ffprobe refuses is ErrUnreadable; a
// missing binary, a timeout or oversized output is another error.
func (p Prober) Probe(ctx context.Context, path string) (Result, error) {
	bin := p.Path
	if bin == "" {
		bin = "ffprobe"
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-v", "error", "-probesize", strconv.Itoa(probeSizeBytes),
		"-analyzeduration", strconv.Itoa(analyzeDurationUs), "-print_format", "json",
		"-show_entries", "format=format_name,duration:stream=codec_type,codec_name,width,height:stream_tags=encoder",
		// Only the MP4 family's demuxer and only this one file: a crafted
		// file cannot make ffprobe open a playlist's other files or URLs.
		"-protocol_whitelist", "file", "-format_whitelist", mp4Formats, "-i", "file:"+path)
	ownGroup(cmd)
	cmd.WaitDelay = killGrace
	out := &capped{limit: maxOutputBytes}
	var stderr capped
	stderr.limit = 2048
	cmd.Stdout, cmd.Stderr = out, &stderr
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("ffprobe %s: killed after %v: %w", path, timeout, ctx.Err())
	case out.over:
		return Result{}, fmt.Errorf("ffprobe %s: output over %d bytes", path, maxOutputBytes)
	case errors.Is(err, exec.ErrNotFound):
		return Result{}, fmt.Errorf("find ffprobe (install ffmpeg, or pass --ffprobe PATH): %w", err)
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return Result{}, fmt.Errorf("%w: %s", ErrUnreadable, strings.TrimSpace(string(stderr.buf)))
		}
		return Result{}, fmt.Errorf("ffprobe %s: %w", path, err)
	}
	return parse(out.buf)
}

func parse(b []byte) (Result, error) {
	var raw struct {
		Format struct {
			FormatName string `json:"format_name"`
			Duration   string `json:"duration"`
		} `json:"format"`
		Streams []Stream `json:"streams"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Result{}, fmt.Errorf("ffprobe output is not its JSON: %w", err)
	}
	r := Result{Container: raw.Format.FormatName, Streams: raw.Streams}
	if raw.Format.Duration != "" {
		d, err := strconv.ParseFloat(raw.Format.Duration, 64)
		if err != nil || math.IsNaN(d) || math.IsInf(d, 0) {
			return Result{}, fmt.Errorf("ffprobe duration %q is not a number", raw.Format.Duration)
		}
		r.DurationS = d
	}
	return r, nil
}

// capped keeps at most limit bytes and notes that more came.
type capped struct {
	buf   []byte
	limit int
	over  bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.limit - len(c.buf)
	if len(p) > room {
		c.over = true
		c.buf = append(c.buf, p[:max(room, 0)]...)
		return len(p), nil
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// Mismatch is a profile field the file does not meet.
type Mismatch struct {
	Field     string
	Want, Got string
}

func (m *Mismatch) Error() string { return fmt.Sprintf("%s: want %s, got %s", m.Field, m.Want, m.Got) }

// Expect is what a job fixes of the profile's duration check.
type Expect struct {
	// DurationS is the expected duration (0: not checked).
	DurationS float64
	// AtMost makes DurationS an upper bound only (an input cut to it).
	AtMost bool
}

// Check compares r with profile and returns the first *Mismatch, in the
// order container, video tracks, codec, width, height, duration.
func Check(profile protocol.VerifyProfile, r Result, want Expect) error {
	video := r.Video()
	minVideo := max(profile.MinVideoTracks, 1)
	if profile.Container != "" && r.Container != profile.Container {
		return &Mismatch{Field: "container", Want: profile.Container, Got: orNone(r.Container)}
	}
	if len(video) < minVideo {
		return &Mismatch{Field: "video_tracks", Want: "at least " + strconv.Itoa(minVideo), Got: strconv.Itoa(len(video))}
	}
	v := video[0]
	switch {
	case profile.Codec != "" && v.CodecName != profile.Codec:
		return &Mismatch{Field: "codec", Want: profile.Codec, Got: orNone(v.CodecName)}
	case profile.Width != 0 && v.Width != profile.Width:
		return &Mismatch{Field: "width", Want: strconv.Itoa(profile.Width), Got: strconv.Itoa(v.Width)}
	case profile.Height != 0 && v.Height != profile.Height:
		return &Mismatch{Field: "height", Want: strconv.Itoa(profile.Height), Got: strconv.Itoa(v.Height)}
	}
	if want.DurationS > 0 {
		tol := profile.DurationToleranceS
		got := r.DurationS
		if got > want.DurationS+tol || (!want.AtMost && got < want.DurationS-tol) {
			bound := fmt.Sprintf("%gs ± %gs", want.DurationS, tol)
			if want.AtMost {
				bound = fmt.Sprintf("at most %gs + %gs", want.DurationS, tol)
			}
			return &Mismatch{Field: "duration", Want: bound, Got: fmt.Sprintf("%gs", got)}
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Summary is a one-line account of r, for logs and evidence.
func (r Result) Summary() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "container=%s duration=%.3fs", r.Container, r.DurationS)
	for _, s := range r.Streams {
		fmt.Fprintf(&b, " [%s %s", s.CodecType, s.CodecName)
		if s.CodecType == "video" {
			fmt.Fprintf(&b, " %dx%d", s.Width, s.Height)
		}
		if s.Tags.Encoder != "" {
			fmt.Fprintf(&b, " encoder=%q", s.Tags.Encoder)
		}
		b.WriteString("]")
	}
	return b.String()
}
