package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
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
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/grant"
)

// transcodeStack is a stack with one agent running the built-in ffmpeg
// runners (ffmpeg.h264_720p transcodes a job's input), and a small MP4 to
// give it.
func transcodeStack(t *testing.T) (*stack, string) {
	t.Helper()
	ffmpeg := needFFmpeg(t)
	s := newStack(t)
	creds, _ := s.pair(runner.ServiceH264p720)
	runAgent(t, "agent", creds, agentOptions{services: []string{runner.ServiceH264p720},
		runners: runner.Builtin(clock.Real{}, ffmpeg)})
	in := filepath.Join(t.TempDir(), "in.mp4")
	out, err := exec.Command(ffmpeg, "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
		"-t", "1", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-y", in).CombinedOutput()
	require.NoError(t, err, "make %s: %s", in, out)
	return s, in
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// tamper flips a byte of every artifact download: what a corrupting proxy
// or a swapped object would hand the buyer.
type tamper struct{ next http.RoundTripper }

func (tp tamper) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := tp.next.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, grant.PathPrefix) {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		body[len(body)/2] ^= 0xff
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// The buyers' client against a real control plane and a real agent: an
// input file uploaded in the three steps (declared with the SHA-256 the
// client computed as it read the file), transcoded by ffmpeg, waited for,
// downloaded with its SHA-256 checked; the same download through a proxy
// that flips a byte is refused and leaves no file; the listing pages as an
// iterator; a refusal is a typed error with the API's code.
func TestClientUploadWaitDownload(t *testing.T) {
	s, in := transcodeStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := client.New(s.baseURL(), s.apiKey, client.WithHTTPClient(s.client),
		client.WithPollInterval(50*time.Millisecond, time.Second))
	require.NoError(t, err)

	var sent int64
	up, err := c.UploadFile(ctx, in, func(done, total int64) { sent = done })
	require.NoError(t, err)
	require.Equal(t, fileSHA256(t, in), up.SHA256, "the declared SHA-256 is the file's")
	fi, err := os.Stat(in)
	require.NoError(t, err)
	require.Equal(t, fi.Size(), sent, "progress reached the file's size")

	created, err := c.Create(ctx, client.CreateRequest{Service: runner.ServiceH264p720,
		Params: map[string]string{"duration_s": "1", "preset": "ultrafast"}, InputID: up.InputID})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.Status)
	require.NotEmpty(t, created.IdempotencyKey, "Create draws an Idempotency-Key")
	again, err := c.Create(ctx, client.CreateRequest{Service: runner.ServiceH264p720,
		Params: map[string]string{"duration_s": "1", "preset": "ultrafast"}, InputID: up.InputID, IdempotencyKey: created.IdempotencyKey})
	require.NoError(t, err)
	require.True(t, again.Replayed(), "the same key and body answer the same job")
	require.Equal(t, created.Job.ID, again.Job.ID)

	var seen []protocol.JobStatus
	d, err := c.Wait(ctx, created.Job.ID, client.WaitOptions{OnChange: func(d buyer.JobDetail) { seen = append(seen, d.Status) }})
	require.NoError(t, err)
	require.Equal(t, protocol.JobSucceeded, d.Status, describe(d))
	require.Equal(t, protocol.JobSucceeded, seen[len(seen)-1], "OnChange saw the end")

	out := filepath.Join(t.TempDir(), "out.mp4")
	n, err := c.DownloadFile(ctx, d, out, nil)
	require.NoError(t, err)
	require.Equal(t, d.Output.Bytes, n)
	require.Equal(t, d.Output.SHA256, fileSHA256(t, out))
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	_, err = mp4.Check(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err, "the download is an MP4")

	bad, err := client.New(s.baseURL(), s.apiKey, client.WithHTTPClient(&http.Client{Transport: tamper{next: s.client.Transport}}))
	require.NoError(t, err)
	tampered := filepath.Join(t.TempDir(), "tampered.mp4")
	_, err = bad.DownloadFile(ctx, d, tampered, nil)
	var ie *client.IntegrityError
	require.True(t, errors.As(err, &ie), "a tampered download is refused: %v", err)
	require.Equal(t, d.Output.SHA256, ie.WantSHA256)
	require.NotEqual(t, ie.WantSHA256, ie.SHA256)
	_, err = os.Stat(tampered)
	require.True(t, os.IsNotExist(err), "nothing is left at the path of a refused download: %v", err)
	left, err := filepath.Glob(filepath.Join(filepath.Dir(tampered), "*"))
	require.NoError(t, err)
	require.Empty(t, left, "no partial file either")

	events, err := c.AllEvents(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, "succeeded", events[len(events)-1].ToStatus)

	// Two more jobs, then the
	// listing in pages of one: every job once, newest first.
	for i := range 2 {
		_, err := c.Create(ctx, client.CreateRequest{Service: runner.ServiceH264p720,
			Params: map[string]string{"duration_s": "1", "preset": "ultrafast", "crf": strconv.Itoa(30 + i)}, InputID: up.InputID})
		require.NoError(t, err)
	}
	var ids []string
	for job, err := range c.List(ctx, client.ListOptions{Limit: 1}) {
		require.NoError(t, err)
		ids = append(ids, job.ID)
	}
	require.Len(t, ids, 3, "every job once across pages of one")
	require.Equal(t, d.ID, ids[2], "newest first")

	_, err = c.Get(ctx, "00000000-0000-4000-8000-000000000000")
	var apiErr *client.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusNotFound, apiErr.Status)
	require.Equal(t, string(protocol.CodeNotFound), apiErr.Code)
	_, err = c.Create(ctx, client.CreateRequest{Service: "no.such.service"})
	require.Equal(t, string(protocol.CodeValidation), client.ErrorCode(err), "%v", err)
}

// `rendermac jobs submit --input in.mp4 --service ffmpeg.h264_720p --wait
// --download out.mp4`, the production binary against the stack: exit 0,
// the output file is the job's (its SHA-256 the API's), the progress on
// stderr. A job that fails exits 1 naming the failure code and message.
func TestCLISubmitWaitDownload(t *testing.T) {
	s, in := transcodeStack(t)
	bin := buildServerBinary(t)
	dir := t.TempDir()
	jobs := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, append([]string{"jobs"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RENDERMAC_API_KEY="+s.apiKey, "RENDERMAC_SERVER="+s.baseURL())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		t.Logf("$ rendermac jobs %s\n(exit %d)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
		return code, stdout.String(), stderr.String()
	}
	code, stdout, stderr := jobs("submit", "--input", in, "--service", runner.ServiceH264p720,
		"--param", "duration_s=1", "--param", "preset=ultrafast", "--wait", "--download", "out.mp4")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "uploaded "+in)
	require.Contains(t, stderr, "succeeded")
	require.Contains(t, stderr, "downloaded out.mp4")
	require.Contains(t, stdout, "status   succeeded")
	id := strings.Fields(strings.SplitN(stdout, "\n", 2)[0])[1]
	d, err := s.buyer.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, d.Output.SHA256, fileSHA256(t, filepath.Join(dir, "out.mp4")), "out.mp4 is the job's output")

	code, stdout, _ = jobs("get", id, "-o", "json")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, `"status": "succeeded"`)
	code, stdout, _ = jobs("list", "-o", "json")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, id)

	// Bytes ffmpeg cannot read: the one attempt fails, the job fails.
	junk := filepath.Join(dir, "junk.mp4")
	require.NoError(t, os.WriteFile(junk, []byte("not a video at all"), 0o600))
	code, _, stderr = jobs("submit", "--input", junk, "--service", runner.ServiceH264p720, "--max-attempts", "1", "--wait")
	require.Equal(t, 1, code, stderr)
	require.Regexp(t, `job [0-9a-f-]+ failed: [a-z_]+: .+`, stderr, "the failure's code and message")

	code, _, stderr = jobs("submit", "--service", runner.ServiceH264p720, "--param", "novalue")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `"novalue" is not KEY=VALUE`)
	code, _, stderr = jobs("submit", "--service", runner.ServiceH264p720, "--input", filepath.Join(dir, "missing.mp4"))
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "missing.mp4: no such file or directory")
}
