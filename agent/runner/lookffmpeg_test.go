package runner

import (
	"os"
	"path/filepath"
	"testing"

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
