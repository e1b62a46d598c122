package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/s3provider"
)

// envInputBytes sets the size of the input TestBigUploadedInputIsTranscoded
// uploads (default inputBytesDefault, rounded up to whole raw 720p
// frames). RENDERMAC_E2E_INPUT_BYTES=536870912 is the 512 MiB run.
const (
	envInputBytes     = "RENDERMAC_E2E_INPUT_BYTES"
	inputBytesDefault = 64 << 20
	rawFrameBytes     = 1280 * 720 * 3 / 2 // one yuv420p 720p frame
)

// TestBigUploadedInputIsTranscoded: on the directory store and on S3, a
// buyer uploads a large video (raw 720p frames in Matroska) through the
// create-only grant of POST /v1/inputs, names it in an ffmpeg.h264_720p
// job, and a real agent downloads it through its get grant, transcodes
// one second of it with ffmpeg, and the job commits (ffprobe verification
// on the server). The control plane is a `rendermac server` process; its
// peak RSS (VmHWM) is read before and after the upload and the job: the
// bytes stream to disk or to the bucket and are hashed as a stream, so it
// grows by far less than the input. A second PUT of the grant is refused,
// and an upload whose SHA-256 is not the declared one is refused at job
// creation naming input_id. Without ffmpeg the test skips, except under
// CI=true.
func TestBigUploadedInputIsTranscoded(t *testing.T) {
	ffmpeg := needFFmpeg(t)
	size := inputBytesDefault
	if v := os.Getenv(envInputBytes); v != "" {
		var err error
		size, err = strconv.Atoi(v)
		require.NoError(t, err, envInputBytes)
		require.True(t, size >= rawFrameBytes, "%s=%d: want at least one frame, %d", envInputBytes, size, rawFrameBytes)
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.mkv")
	makeRawVideo(t, ffmpeg, big, (size+rawFrameBytes-1)/rawFrameBytes)
	small := filepath.Join(dir, "small.mkv")
	makeRawVideo(t, ffmpeg, small, 2)

	t.Run("fs", func(t *testing.T) {
		uploadAndTranscode(t, ffmpeg, big, small, []string{"--artifacts", t.TempDir()})
	})
	t.Run("s3", func(t *testing.T) {
		b := s3provider.MustBucket(t)
		uploadAndTranscode(t, ffmpeg, big, small,
			[]string{"--artifacts", "s3://" + b.Name + "/farm", "--s3-endpoint", b.Endpoint, "--s3-path-style"},
			"AWS_ACCESS_KEY_ID="+b.AccessKey, "AWS_SECRET_ACCESS_KEY="+b.SecretKey, "AWS_REGION="+b.Region)
	})
}

// makeRawVideo writes frames of ffmpeg's test pattern, uncompressed 720p,
// in Matroska: a large input in little time.
func makeRawVideo(t *testing.T, ffmpeg, path string, frames int) {
	t.Helper()
	out, err := exec.Command(ffmpeg, "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25",
		"-frames:v", strconv.Itoa(frames), "-c:v", "rawvideo", "-pix_fmt", "yuv420p", "-y", path).CombinedOutput()
	require.NoError(t, err, "make %s: %s", path, out)
}

func uploadAndTranscode(t *testing.T, ffmpeg, big, small string, storeArgs []string, env ...string) {
	ctx := context.Background()
	p := startServerProcess(t, storeArgs, env...)
	runAgent(t, "agent", p.pair(t, runner.ServiceH264p720), agentOptions{services: []string{runner.ServiceH264p720},
		runners: runner.Builtin(clock.Real{}, ffmpeg)})
	params := map[string]string{"duration_s": "1", "preset": "ultrafast"}
	transcode := func(path string) (time.Duration, string) {
		t.Helper()
		start := time.Now()
		up, err := p.buyer.UploadFile(ctx, path, nil)
		require.NoError(t, err)
		took := time.Since(start)
		created, err := p.buyer.Create(ctx, client.CreateRequest{Service: runner.ServiceH264p720, Params: params, InputID: up.InputID})
		require.NoError(t, err)
		d := created.Job
		require.Equal(t, up.Bytes, d.Input.Bytes)
		require.Equal(t, up.SHA256, d.Input.SHA256)
		d = p.waitSucceeded(t, d.ID)
		require.NotEmpty(t, d.Attempts)
		require.Equal(t, "libx264", d.Attempts[len(d.Attempts)-1].Encoder, describe(d))

		// The grant is create-only: a second PUT is refused.
		err = p.buyer.PutInput(ctx, up, strings.NewReader("other bytes"), 11)
		var se *client.Error
		require.True(t, errors.As(err, &se), "a second PUT: %v", err)
		require.True(t, se.Sealed(), "a second PUT: %v", err)
		return took, up.InputID
	}
	// A small job first, so the "before" reading is a warm server's.
	transcode(small)
	before := procMemory(t, p.cmd.Process.Pid)
	start := time.Now()
	upload, _ := transcode(big)
	wall := time.Since(start)
	after := procMemory(t, p.cmd.Process.Pid)
	fi, err := os.Stat(big)
	require.NoError(t, err)
	grew := after.hwm - before.hwm
	t.Logf("input %s (%d bytes) uploaded by the buyer through its grant in %s, transcoded by ffmpeg and committed "+
		"(upload + job wall %s); `rendermac server` (pid %d) VmHWM %s -> %s (+%s), VmRSS %s -> %s",
		mib(fi.Size()), fi.Size(), upload.Round(time.Millisecond), wall.Round(time.Millisecond), p.cmd.Process.Pid,
		mib(before.hwm), mib(after.hwm), mib(grew), mib(before.rss), mib(after.rss))
	require.Less(t, grew, min(fi.Size()/2, 64<<20), "the server's peak RSS grew by %s for a %s input", mib(grew), mib(fi.Size()))

	// An upload that is not the declared bytes is refused naming input_id.
	content := []byte("not the declared bytes")
	wrong := sha256.Sum256([]byte("the declared bytes"))
	up, err := p.buyer.DeclareInput(ctx, int64(len(content)), hex.EncodeToString(wrong[:]))
	require.NoError(t, err)
	require.NoError(t, p.buyer.PutInput(ctx, up, strings.NewReader(string(content)), int64(len(content))))
	_, err = p.buyer.Create(ctx, client.CreateRequest{Service: runner.ServiceH264p720, Params: params, InputID: up.InputID})
	var se *client.Error
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, http.StatusUnprocessableEntity, se.Status, "%v", err)
	require.Equal(t, "input_id", se.Field)
	got := sha256.Sum256(content)
	require.Equal(t, fmt.Sprintf("input_id: the upload has sha256 %x, declared %x", got, wrong), se.Message)
}
