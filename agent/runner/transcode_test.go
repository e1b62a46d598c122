package runner

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// The encoder choice is a pure function of GOOS, tested here for darwin on
// a Linux machine: no Mac is available to this project's CI, so that
// VideoToolbox really encodes is not shown, only that a darwin build asks
// for it first and falls back to the software encoder.
func TestTranscodeEncodersByGOOS(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"h264_videotoolbox", "libx264"}, Encoders("darwin", "h264"))
	require.Equal(t, []string{"hevc_videotoolbox", "libx265"}, Encoders("darwin", "hevc"))
	require.Equal(t, []string{"libx264"}, Encoders("linux", "h264"))
	require.Equal(t, []string{"libx265"}, Encoders("linux", "hevc"))
}

func TestTranscodeArgsForDarwin(t *testing.T) {
	t.Parallel()
	tr := Transcode{GOOS: "darwin", Codec: "hevc", Width: 1280, Height: 720, BitrateKbps: 2500}
	p, err := ParseTranscodeParams(map[string]string{"duration_s": "4"})
	require.NoError(t, err)
	vf := "scale=1280:720:force_original_aspect_ratio=decrease,pad=1280:720:(ow-iw)/2:(oh-ih)/2,setsar=1"
	head := []string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-protocol_whitelist", "file",
		"-format_whitelist", inputFormats, "-i", "/w/in", "-t", "4", "-vf", vf}
	tail := []string{"-tag:v", "hvc1", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "128k", "-movflags", "+faststart", "-f", "mp4", "/w/out.mp4"}
	args, err := tr.TranscodeArgs("hevc_videotoolbox", p, "/w/in", "/w/out.mp4")
	require.NoError(t, err)
	require.Equal(t, join(head, []string{"-c:v", "hevc_videotoolbox", "-b:v", "2500k", "-maxrate", "2500k", "-bufsize", "5000k",
		"-allow_sw", "0"}, tail), args)
	args, err = tr.TranscodeArgs("libx265", p, "/w/in", "/w/out.mp4")
	require.NoError(t, err)
	require.Equal(t, join(head, []string{"-c:v", "libx265", "-b:v", "2500k", "-maxrate", "2500k", "-bufsize", "5000k",
		"-preset", "medium", "-x265-params", "log-level=error"}, tail), args)

	_, err = tr.TranscodeArgs("libx265", p, "", "/w/out.mp4")
	var pe *ParamError
	require.ErrorAs(t, err, &pe, "a transcode without an input is the buyer's error")
	_, err = tr.TranscodeArgs("libx265", p, "in", "/w/out.mp4")
	require.Error(t, err, "a relative path could be read as an option")
	_, err = ParseTranscodeParams(map[string]string{"duration_s": "3601"})
	require.ErrorAs(t, err, &pe)
}

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// A darwin transcode on this Linux ffmpeg: the VideoToolbox encoder is
// unknown to it, so the first run fails and the runner runs once more with
// the software encoder, which the output's stream names.
func TestTranscodeFallsBackWhenTheEncoderFails(t *testing.T) {
	t.Parallel()
	bin := requireFFmpeg(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.mp4")
	require.NoError(t, FFmpeg{Path: bin, Width: 320, Height: 240}.Run(context.Background(),
		Spec{Params: map[string]string{"duration_s": "1", "preset": "ultrafast"}}, "", in))
	for _, codec := range []string{"h264", "hevc"} {
		var used []string
		tr := Transcode{Path: bin, GOOS: "darwin", Codec: codec, Width: 256, Height: 144, BitrateKbps: 300,
			Used: func(e string) { used = append(used, e) }}
		out := filepath.Join(dir, codec+".mp4")
		require.NoError(t, tr.Run(context.Background(), Spec{}, in, out))
		soft := Encoders("linux", codec)[0]
		require.Equal(t, []string{soft}, used, "the fallback is the one run that succeeded")
		probe := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
			"stream=codec_name,width,height:stream_tags=encoder", "-of", "compact=p=0:nk=1", out)
		got, err := probe.Output()
		require.NoError(t, err)
		f := strings.Split(strings.TrimSpace(string(got)), "|")
		require.Len(t, f, 4, "%s", got)
		require.Equal(t, []string{codec, "256", "144"}, f[:3])
		require.True(t, strings.HasSuffix(f[3], " "+soft), "encoder tag: %s", got)
		checkFile(t, out)
	}

	// When every encoder fails, the error names each attempt.
	err := Transcode{Path: bin, GOOS: "darwin", Codec: "h264", Width: 256, Height: 144, BitrateKbps: 300}.Run(
		context.Background(), Spec{}, filepath.Join(dir, "absent.mp4"), filepath.Join(dir, "x.mp4"))
	require.ErrorContains(t, err, "ffmpeg with h264_videotoolbox")
	require.ErrorContains(t, err, "ffmpeg with libx264")
}

// The registry builds a runner per catalogue entry by its kind.
func TestForServicesByKind(t *testing.T) {
	t.Parallel()
	cat, err := protocol.ParseCatalogue([]byte(`{"include_builtin": true, "services": [
	  {"name": "transcode.hevc_720p", "price_cents": 60,
	   "runner": {"kind": "transcode", "codec": "hevc", "width": 1280, "height": 720, "bitrate_kbps": 2500}}]}`))
	require.NoError(t, err)
	rs, err := ForServices(cat, []string{"transcode.hevc_720p", "ffmpeg.h264_720p", "synthetic.mp4"}, Env{GOOS: "darwin"})
	require.NoError(t, err)
	require.Equal(t, Transcode{GOOS: "darwin", Codec: "hevc", Width: 1280, Height: 720, BitrateKbps: 2500}, rs["transcode.hevc_720p"])
	require.Equal(t, FFmpeg{Width: 1280, Height: 720}, rs["ffmpeg.h264_720p"])
	require.IsType(t, Synthetic{}, rs["synthetic.mp4"])
	require.True(t, NeedsFFmpeg(cat, []string{"synthetic.mp4", "transcode.hevc_720p"}))
	require.False(t, NeedsFFmpeg(cat, []string{"synthetic.mp4"}))

	_, err = ForServices(cat, []string{"nope"}, Env{})
	require.ErrorContains(t, err, `service "nope" is not in the catalogue`)
	odd := []protocol.Service{{Name: "x", Runner: protocol.RunnerSpec{Kind: "teleport"}}}
	_, err = ForServices(odd, []string{"x"}, Env{})
	require.ErrorContains(t, err, `runner kind "teleport" is not built into this agent`)
}
