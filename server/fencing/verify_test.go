package fencing_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/probe"
)

// checked is a service whose profile wants 320x240 H.264 of duration_s
// (default 1) seconds within 0.3 s.
var checked = protocol.Service{Name: "check.h264_240p", PriceCents: 5, Media: "mp4",
	Runner: protocol.RunnerSpec{Kind: protocol.RunnerFFmpeg, Width: 320, Height: 240},
	Params: []protocol.ParamSpec{{Name: "duration_s", Type: protocol.ParamInteger, Min: 1, Max: 10, Default: "1"}},
	Verify: protocol.VerifyProfile{Container: "mov,mp4,m4a,3gp,3g2,mj2", Codec: "h264", Width: 320, Height: 240,
		DurationParam: "duration_s", DurationToleranceS: 0.3, MinVideoTracks: 1}}

const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// render makes a file with the real ffmpeg: lavfi source args, then output
// args.
func render(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("ffmpeg is not on PATH but CI=true requires the verification test")
		}
		t.Skip("ffmpeg is not on PATH")
	}
	out := filepath.Join(dir, name)
	full := append([]string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y"}, args...)
	full = append(full, "-movflags", "+faststart", "-f", "mp4", out)
	msg, err := exec.Command(bin, full...).CombinedOutput()
	require.NoError(t, err, "%s", msg)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	return data
}

// Verification before transaction 2: the structural walk first, then
// ffprobe against the service's profile. Each refusal is
// verification_failed with a message naming the field and both values,
// recorded on the attempt; a file that meets the profile succeeds and the
// attempt records the encoder ffprobe found.
func TestVerificationProfile(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Skip("ffprobe is not on PATH")
	}
	dir := t.TempDir()
	pattern := func(size, dur string) []string {
		return []string{"-f", "lavfi", "-i", "testsrc2=size=" + size + ":rate=15:duration=" + dur}
	}
	good := render(t, dir, "good.mp4", append(pattern("320x240", "1"), "-c:v", "libx264", "-preset", "ultrafast")...)
	hevc := render(t, dir, "hevc.mp4", append(pattern("320x240", "1"), "-c:v", "libx265", "-preset", "ultrafast",
		"-x265-params", "log-level=error", "-tag:v", "hvc1")...)
	wide := render(t, dir, "wide.mp4", append(pattern("640x480", "1"), "-c:v", "libx264", "-preset", "ultrafast")...)
	long := render(t, dir, "long.mp4", append(pattern("320x240", "3"), "-c:v", "libx264", "-preset", "ultrafast")...)
	audio := render(t, dir, "audio.mp4", "-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac")
	// A real file with its one track renamed away: the boxes still fit,
	// and there is no trak.
	noTrack := bytes.Replace(bytes.Clone(good), []byte("trak"), []byte("free"), 1)
	require.NotEqual(t, good, noTrack)

	cfg := fencing.Config{Services: append(append([]protocol.Service{}, protocol.Services...), checked),
		Prober: &probe.Prober{Timeout: time.Minute}}
	b := setup(t, cfg)
	ctx := context.Background()
	const device = "00000000-0000-4000-8000-0000000000d3"
	require.NoError(t, b.svc.CreateDevice(ctx, device, "mac3", []string{checked.Name}, 8, protocol.HashCommitToken("dev3")))

	for _, c := range []struct {
		name    string
		content []byte
		params  map[string]string
		code    protocol.Code
		message string
		encoder string
	}{
		{"meets the profile", good, nil, protocol.CodeCommitOK, "", "libx264"},
		{"duration param set", long, map[string]string{"duration_s": "3"}, protocol.CodeCommitOK, "", "libx264"},
		{"wrong codec", hevc, nil, protocol.CodeVerificationFailed, "profile_mismatch: codec: want h264, got hevc", "libx265"},
		{"wrong resolution", wide, nil, protocol.CodeVerificationFailed, "profile_mismatch: width: want 320, got 640", "libx264"},
		{"wrong duration", long, nil, protocol.CodeVerificationFailed, "profile_mismatch: duration: want 1s ± 0.3s, got 3s", "libx264"},
		{"no video track", audio, nil, protocol.CodeVerificationFailed, "profile_mismatch: video_tracks: want at least 1, got 0", ""},
		{"truncated", good[:len(good)/2], nil, protocol.CodeVerificationFailed, "media_invalid: mp4: box \"mdat\"", ""},
		{"zero tracks", noTrack, nil, protocol.CodeVerificationFailed, "media_invalid: mp4: no trak box in moov", ""},
	} {
		b.createJob(t, t0, func(r *protocol.CreateJobRequest) {
			// No input: the profile's duration is the param's (or its default).
			r.Service, r.Params, r.Input = checked.Name, c.params, protocol.InputRef{SHA256: emptySHA}
		})
		offer := b.lease(t, t0, device)
		require.Equal(t, protocol.CodeProgressOK, b.progress(t, t0, device, offer, protocol.AttemptUploading).Code)
		r, err := b.svc.Commit(ctx, t0, device, commitOf(offer, b.put(t, offer, c.content)))
		require.NoError(t, err, c.name)
		require.Equal(t, c.code, r.Code, "%s: %+v", c.name, r)
		require.Contains(t, r.Message, c.message, c.name)
		var encoder, message string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT coalesce(encoder, ''), coalesce(verify_message, '') FROM job_attempts WHERE id = $1`,
			offer.AttemptID).Scan(&encoder, &message))
		require.Equal(t, c.encoder, encoder, c.name)
		require.Equal(t, r.Message, message, c.name)
		t.Logf("%-18s %s %q encoder=%q", c.name, r.Code, r.Message, encoder)
	}
}
