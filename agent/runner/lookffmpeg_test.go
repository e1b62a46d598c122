package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An ffmpeg that is on disk but cannot run (a shared library missing at
// run time) is reported as a broken install, with the loader's message.
func TestLookFFmpegReportsABinaryThatDoesNotRun(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ffmpeg")
	script := "#!/bin/sh\necho 'ffmpeg: error while loading shared libraries: libavdevice.so.59: cannot open shared object file' >&2\nexit 127\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	_, err := LookFFmpeg(bin)
	require.ErrorContains(t, err, "does not run")
	require.ErrorContains(t, err, "libavdevice.so.59")
	require.ErrorContains(t, err, "reinstall")

	ok := filepath.Join(t.TempDir(), "ffmpeg")
	require.NoError(t, os.WriteFile(ok, []byte("#!/bin/sh\necho 'ffmpeg version 6.0'\n"), 0o755))
	p, err := LookFFmpeg(ok)
	require.NoError(t, err)
	require.Equal(t, ok, p)

	_, err = LookFFmpeg(filepath.Join(t.TempDir(), "absent"))
	require.ErrorContains(t, err, "install it")
}

// A probe that outlives its timeout (a loaded or sleeping machine) is
// inconclusive: the binary is taken, not reported as a broken install.
func TestLookFFmpegTakesABinaryTooSlowToAnswer(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ffmpeg")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nsleep 5\nexit 1\n"), 0o755))
	old := probeTimeout
	probeTimeout = 200 * time.Millisecond
	t.Cleanup(func() { probeTimeout = old })
	p, err := LookFFmpeg(bin)
	require.NoError(t, err)
	require.Equal(t, bin, p)
}

// A job runs ffmpeg once, to render: it does not probe `-version` again
// (the start-up probe did), since a probe with a wall-clock timeout is
// killed when the Mac sleeps through it and would fail a sound job for good.
func TestFFmpegJobDoesNotProbeTheBinary(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	bin := filepath.Join(dir, "ffmpeg")
	script := "#!/bin/sh\necho \"$@\" >> '" + calls + "'\ncase \"$1\" in -version) exit 9;; esac\nexit 0\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	require.NoError(t, FFmpeg{Path: bin, Width: 1280, Height: 720}.Run(t.Context(),
		Spec{Service: ServiceH264p720}, "", filepath.Join(dir, "o.mp4")))
	got, err := os.ReadFile(calls)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(got), "\n"), "one invocation: %q", got)
	require.NotContains(t, string(got), "-version")
	require.Contains(t, string(got), "-hide_banner")
}
