package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ffprobe")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return p
}

// A hanging ffprobe is killed at the timeout together with what it
// started: the whole process group.
func TestProbeTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "child")
	bin := script(t, "sleep 300 & echo $! > '"+pidFile+"'\nwait")
	start := time.Now()
	_, err := Prober{Path: bin, Timeout: 500 * time.Millisecond}.Probe(context.Background(), "/dev/null")
	require.ErrorContains(t, err, "killed after 500ms")
	require.False(t, errors.Is(err, ErrUnreadable), "a timeout is not a verdict on the file")
	require.Less(t, time.Since(start), 10*time.Second)
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 5*time.Second, 20*time.Millisecond,
		"the grandchild sleep %d outlived the kill", pid)
}

func TestProbeBoundsAndErrors(t *testing.T) {
	t.Parallel()
	_, err := Prober{Path: script(t, "head -c 2000000 /dev/zero")}.Probe(context.Background(), "/x")
	require.ErrorContains(t, err, "output over")
	_, err = Prober{Path: script(t, "echo 'moov atom not found' >&2; exit 1")}.Probe(context.Background(), "/x")
	require.ErrorIs(t, err, ErrUnreadable)
	require.ErrorContains(t, err, "moov atom not found")
	_, err = Prober{Path: filepath.Join(t.TempDir(), "absent")}.Probe(context.Background(), "/x")
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrUnreadable))
	r, err := Prober{Path: script(t, `echo '{"format":{"format_name":"mov,mp4","duration":"2.5"},"streams":[{"codec_type":"video","codec_name":"h264","width":8,"height":6,"tags":{"encoder":"Lavc60 h264_videotoolbox"}}]}'`)}.Probe(context.Background(), "/x")
	require.NoError(t, err)
	require.Equal(t, "h264_videotoolbox", r.Encoder())
	require.InDelta(t, 2.5, r.DurationS, 1e-9)
}

func TestCheckNamesFieldAndBothValues(t *testing.T) {
	t.Parallel()
	video := Stream{CodecType: "video", CodecName: "h264", Width: 1280, Height: 720}
	ok := Result{Container: "mov,mp4,m4a,3gp,3g2,mj2", DurationS: 5.02, Streams: []Stream{video}}
	prof := protocol.VerifyProfile{Container: ok.Container, Codec: "h264", Width: 1280, Height: 720, DurationToleranceS: 0.5}
	require.NoError(t, Check(prof, ok, Expect{DurationS: 5}))
	require.NoError(t, Check(prof, ok, Expect{DurationS: 10, AtMost: true}))
	for want, c := range map[string]struct {
		r Result
		e Expect
	}{
		"container: want mov,mp4,m4a,3gp,3g2,mj2, got matroska,webm": {Result{Container: "matroska,webm", Streams: ok.Streams}, Expect{}},
		"video_tracks: want at least 1, got 0":                       {Result{Container: ok.Container, Streams: []Stream{{CodecType: "audio"}}}, Expect{}},
		"codec: want h264, got hevc":                                 {Result{Container: ok.Container, Streams: []Stream{{CodecType: "video", CodecName: "hevc", Width: 1280, Height: 720}}}, Expect{}},
		"height: want 720, got 1080":                                 {Result{Container: ok.Container, Streams: []Stream{{CodecType: "video", CodecName: "h264", Width: 1280, Height: 1080}}}, Expect{}},
		"duration: want 4s ± 0.5s, got 5.02s":                        {ok, Expect{DurationS: 4}},
		"duration: want at most 4s + 0.5s, got 5.02s":                {ok, Expect{DurationS: 4, AtMost: true}},
	} {
		err := Check(prof, c.r, c.e)
		var m *Mismatch
		require.ErrorAs(t, err, &m, want)
		require.Equal(t, want, err.Error())
	}
}
