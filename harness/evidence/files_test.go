package evidence

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFileNames(t *testing.T) {
	t.Parallel()
	md, js, junit, html := FileNames(sampleCard(false))
	require.Equal(t, "2025-12-02-phase-fault-qualification.md", md)
	require.Equal(t, "2025-12-02-phase-fault-qualification.json", js)
	require.Equal(t, "2025-12-02-phase-fault-qualification-junit.xml", junit)
	require.Equal(t, "2025-12-02-phase-fault-qualification.html", html)
}

func TestWriteAll(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "cards", "new")
	c := sampleCard(false)
	paths, err := WriteAll(dir, c, WriteOptions{NoTimings: true})
	require.NoError(t, err)
	md, js, junit, html := FileNames(c)
	require.Equal(t, []string{filepath.Join(dir, md), filepath.Join(dir, js), filepath.Join(dir, junit), filepath.Join(dir, html)}, paths)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 4, "no temporary files left behind")

	data, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	require.Equal(t, renderMarkdown(t, c, WriteOptions{NoTimings: true}), string(data))
	info, err := os.Stat(paths[1])
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), info.Mode().Perm())

	// Writing again replaces the files in place.
	c.Run.Commit = "abcdef0"
	_, err = WriteAll(dir, c, WriteOptions{NoTimings: true})
	require.NoError(t, err)
	f, err := os.Open(paths[1])
	require.NoError(t, err)
	defer f.Close()
	back, err := ReadJSON(f)
	require.NoError(t, err)
	require.Equal(t, "abcdef0", back.Run.Commit)
}
