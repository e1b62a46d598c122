package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/mp4"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParamErrorsNameTheParam(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		parse  func(map[string]string) error
		params map[string]string
		param  string
	}{
		"synthetic unknown":     {synth, map[string]string{"seed": "a", "bogus": "1"}, "bogus"},
		"synthetic seed long":   {synth, map[string]string{"seed": strings.Repeat("x", 65)}, "seed"},
		"synthetic duration 0":  {synth, map[string]string{"duration_ms": "0"}, "duration_ms"},
		"synthetic duration hi": {synth, map[string]string{"duration_ms": "600001"}, "duration_ms"},
		"synthetic mdat hi":     {synth, map[string]string{"mdat_bytes": "1073741825"}, "mdat_bytes"},
		"synthetic mdat text":   {synth, map[string]string{"mdat_bytes": "1e3"}, "mdat_bytes"},
		"synthetic delay neg":   {synth, map[string]string{"delay_ms": "-1"}, "delay_ms"},
		"ffmpeg unknown":        {ff, map[string]string{"vf": "drawtext"}, "vf"},
		"ffmpeg crf low":        {ff, map[string]string{"crf": "17"}, "crf"},
		"ffmpeg crf high":       {ff, map[string]string{"crf": "36"}, "crf"},
		"ffmpeg crf junk":       {ff, map[string]string{"crf": "23; rm -rf /"}, "crf"},
		"ffmpeg preset":         {ff, map[string]string{"preset": "veryslow"}, "preset"},
		"ffmpeg duration":       {ff, map[string]string{"duration_s": "61"}, "duration_s"},
	} {
		err := tc.parse(tc.params)
		var pe *ParamError
		require.ErrorAs(t, err, &pe, name)
		require.Equal(t, tc.param, pe.Param, name)
		require.Contains(t, err.Error(), `"`+tc.param+`"`, name)
	}
}

func synth(p map[string]string) error { _, err := ParseSyntheticParams(p); return err }
func ff(p map[string]string) error    { _, err := ParseFFmpegParams(p); return err }

func TestParamDefaultsAndBounds(t *testing.T) {
	t.Parallel()
	s, err := ParseSyntheticParams(nil)
	require.NoError(t, err)
	require.Equal(t, SyntheticParams{DurationMs: 1000, MdatBytes: mp4.DefaultMdatBytes}, s)
	s, err = ParseSyntheticParams(map[string]string{"seed": strings.Repeat("x", 64), "duration_ms": "600000",
		"mdat_bytes": "1073741824", "delay_ms": "600000"})
	require.NoError(t, err)
	require.Equal(t, 600000, s.DelayMs)

	f, err := ParseFFmpegParams(nil)
	require.NoError(t, err)
	require.Equal(t, FFmpegParams{CRF: 23, Preset: "medium", DurationS: 5}, f)
	f, err = ParseFFmpegParams(map[string]string{"crf": "18", "preset": "ultrafast", "duration_s": "60"})
	require.NoError(t, err)
	require.Equal(t, FFmpegParams{CRF: 18, Preset: "ultrafast", DurationS: 60, DurationSet: true}, f)
}

func TestSyntheticWritesValidMP4(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out.mp4")
	params := map[string]string{"seed": "s1", "duration_ms": "2500", "mdat_bytes": "1000"}
	require.NoError(t, Synthetic{Clock: clock.Real{}}.Run(context.Background(), Spec{Service: ServiceSynthetic, Params: params}, "", out))
	info := checkFile(t, out)
	require.Equal(t, uint64(2500), info.Duration)
	require.Equal(t, int64(1000), info.MdatBytes)
	p, err := ParseSyntheticParams(params)
	require.NoError(t, err)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, p.File(), data, "output is a pure function of the params")
}

func TestSyntheticDelayHonoursClockAndCancel(t *testing.T) {
	t.Parallel()
	stub := clock.NewStub(time.Unix(0, 0))
	out := filepath.Join(t.TempDir(), "out.mp4")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Synthetic{Clock: stub}.Run(ctx, Spec{Params: map[string]string{"delay_ms": "600000"}}, "", out)
	}()
	// Time moves only when the test says so: advance a few steps, then cancel.
	for i := 0; i < 3; i++ {
		require.Eventually(t, func() bool { return stub.Waiters() == 1 }, 5*time.Second, time.Millisecond)
		stub.Advance(delayStep)
	}
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	_, statErr := os.Stat(out)
	require.ErrorIs(t, statErr, os.ErrNotExist, "a cancelled run writes nothing")
}

func TestFFmpegArgsAreAFixedTemplate(t *testing.T) {
	t.Parallel()
	f := FFmpeg{Width: 1280, Height: 720}
	p, err := ParseFFmpegParams(map[string]string{"crf": "20", "preset": "fast", "duration_s": "3"})
	require.NoError(t, err)
	args, err := f.Args(p, "", "/w/out.mp4")
	require.NoError(t, err)
	require.Equal(t, []string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y",
		"-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30:duration=3",
		"-c:v", "libx264", "-preset", "fast", "-crf", "20", "-pix_fmt", "yuv420p",
		"-movflags", "+faststart", "-f", "mp4", "/w/out.mp4"}, args)

	args, err = f.Args(p, "/w/input", "/w/out.mp4")
	require.NoError(t, err)
	joined := strings.Join(args, " ")
	require.Contains(t, joined, "-protocol_whitelist file -format_whitelist "+inputFormats+" -i /w/input -t 3 -vf scale=-2:720")

	_, err = f.Args(p, "relative", "/w/out.mp4")
	require.Error(t, err, "a relative path could be read as an option")
	_, err = FFmpeg{}.Args(p, "", "/w/out.mp4")
	require.Error(t, err)
}

func TestFFmpegMissingBinaryIsClear(t *testing.T) {
	t.Parallel()
	err := FFmpeg{Path: "/nonexistent/ffmpeg", Width: 1280, Height: 720}.Run(context.Background(),
		Spec{Service: ServiceH264p720}, "", filepath.Join(t.TempDir(), "o.mp4"))
	require.ErrorContains(t, err, "find ffmpeg")
}

// requireFFmpeg returns the ffmpeg path, skipping locally and failing in CI
// (CI=true) when it is missing, so CI can never pass without exercising it.
func requireFFmpeg(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ffmpeg")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("ffmpeg is not on PATH but CI=true requires the FFmpeg runner test: apt-get install ffmpeg")
	}
	t.Skip("ffmpeg is not on PATH; install it (apt-get install ffmpeg) to run the FFmpeg runner test")
	return ""
}

func TestFFmpegRendersValidMP4(t *testing.T) {
	t.Parallel()
	bin := requireFFmpeg(t)
	dir := t.TempDir()
	rs := Builtin(clock.Real{}, bin)
	pattern := filepath.Join(dir, "pattern.mp4")
	params := map[string]string{"preset": "ultrafast", "crf": "30", "duration_s": "1"}
	require.NoError(t, rs[ServiceH264p720].Run(context.Background(), Spec{Service: ServiceH264p720, Params: params}, "", pattern))
	info := checkFile(t, pattern)
	require.Positive(t, info.Tracks)

	// The rendered file as an input of the other service: the file path branch.
	scaled := filepath.Join(dir, "scaled.mp4")
	require.NoError(t, rs[ServiceH264p1080].Run(context.Background(), Spec{Service: ServiceH264p1080, Params: params}, pattern, scaled))
	checkFile(t, scaled)
}

func TestFFmpegRejectsPlaylistInput(t *testing.T) {
	t.Parallel()
	bin := requireFFmpeg(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "input")
	require.NoError(t, os.WriteFile(in, []byte("#EXTM3U\n#EXTINF:1,\n/etc/hostname\n"), 0o600))
	err := FFmpeg{Path: bin, Width: 1280, Height: 720}.Run(context.Background(), Spec{}, in, filepath.Join(dir, "o.mp4"))
	require.ErrorContains(t, err, "ffmpeg: exit status")
}

func TestFFmpegStopsOnCancel(t *testing.T) {
	t.Parallel()
	bin := requireFFmpeg(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("lease lost")
	cancel(cause)
	err := FFmpeg{Path: bin, Width: 1920, Height: 1080}.Run(ctx, Spec{Params: map[string]string{"duration_s": "60"}},
		"", filepath.Join(t.TempDir(), "o.mp4"))
	require.ErrorIs(t, err, cause)
}

func checkFile(t *testing.T, path string) mp4.Info {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	info, err := mp4.Check(f, st.Size())
	require.NoError(t, err)
	return info
}
