package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
)

// One real render of each runner kind this package has, on this machine,
// through the registry from a catalogue file: its wall time and ffprobe's
// summary of the output are logged (go test -v -run TestRenderEachKind).
func TestRenderEachKind(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 720p H.264 and HEVC: minutes on a loaded machine")
	}
	bin := requireFFmpeg(t)
	cat, err := protocol.ParseCatalogue([]byte(`{"include_builtin": true, "services": [
	  {"name": "transcode.h264_720p", "price_cents": 50,
	   "runner": {"kind": "transcode", "codec": "h264", "width": 1280, "height": 720, "bitrate_kbps": 2500}},
	  {"name": "transcode.hevc_720p", "price_cents": 60,
	   "runner": {"kind": "transcode", "codec": "hevc", "width": 1280, "height": 720, "bitrate_kbps": 2000}}]}`))
	require.NoError(t, err)
	names := []string{"synthetic.mp4", "ffmpeg.h264_720p", "transcode.h264_720p", "transcode.hevc_720p"}
	rs, err := ForServices(cat, names, Env{Clock: clock.Real{}, FFmpeg: bin})
	require.NoError(t, err)
	dir := t.TempDir()
	input := filepath.Join(dir, "ffmpeg.h264_720p.mp4") // the pattern is the transcodes' input
	want := map[string]string{"ffmpeg.h264_720p": "codec_name=h264|codec_type=video|width=1280|height=720", "transcode.h264_720p": "codec_name=h264|codec_type=video|width=1280|height=720",
		"transcode.hevc_720p": "codec_name=hevc|codec_type=video|width=1280|height=720"}
	for _, name := range names {
		params := map[string]string{}
		in := ""
		switch {
		case name == "synthetic.mp4":
			params["duration_ms"] = "2000"
		case name == "ffmpeg.h264_720p":
			params["duration_s"], params["preset"] = "2", "veryfast"
		default:
			in = input
		}
		out := filepath.Join(dir, name+".mp4")
		start := time.Now()
		require.NoError(t, rs[name].Run(context.Background(), Spec{Service: name, Params: params}, in, out), name)
		took := time.Since(start)
		st, err := os.Stat(out)
		require.NoError(t, err)
		summary := ffprobeSummary(t, out)
		t.Logf("%-20s kind=%-9s %6.2fs %8d bytes  %s", name, mustKind(cat, name), took.Seconds(), st.Size(), summary)
		if w, ok := want[name]; ok {
			require.Contains(t, summary, w, name)
		}
		checkFile(t, out)
	}
}

func mustKind(cat []protocol.Service, name string) string {
	s, _ := protocol.FindService(cat, name)
	return s.Runner.Kind
}

// ffprobeSummary is "container duration: codec WxH encoder; ..." or
// ffprobe's complaint (the synthetic file holds no decodable video).
func ffprobeSummary(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-show_entries",
		"format=format_name,duration:stream=codec_type,codec_name,width,height,bit_rate:stream_tags=encoder",
		"-of", "compact=p=0", path).CombinedOutput()
	s := strings.Join(strings.Fields(strings.ReplaceAll(string(out), "\n", " ; ")), " ")
	if err != nil {
		return "ffprobe: " + err.Error() + ": " + s
	}
	return s
}
