package api_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/api"
)

func TestLoadMetricsToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), mode))
		return p
	}
	hash, err := api.LoadMetricsToken("")
	require.NoError(t, err)
	require.Empty(t, hash, "no file: no token")

	const token = "0123456789abcdef0123"
	hash, err = api.LoadMetricsToken(write("ok", token+"\n", 0o600))
	require.NoError(t, err)
	require.Equal(t, api.HashSecret(token), hash, "only the hash is kept, trailing newline trimmed")

	_, err = api.LoadMetricsToken(write("open", token, 0o640))
	require.ErrorContains(t, err, "readable by group or others")
	_, err = api.LoadMetricsToken(write("short", "abc", 0o600))
	require.ErrorContains(t, err, "at least 16 bytes")
	require.NotContains(t, err.Error(), "abc", "the file's content is not echoed")
	_, err = api.LoadMetricsToken(write("spaces", "two words and more words", 0o600))
	require.ErrorContains(t, err, "without spaces")
	_, err = api.LoadMetricsToken(filepath.Join(dir, "missing"))
	require.ErrorContains(t, err, "metrics token")
}
