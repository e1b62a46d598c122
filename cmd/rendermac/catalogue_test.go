package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// The agent and the server read the same file; a bad one stops them at
// start with the file, the service and the field named.
func TestCatalogueFlag(t *testing.T) {
	t.Parallel()
	cat, err := loadCatalogue("")
	require.NoError(t, err)
	require.Equal(t, protocol.Services, cat)

	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"services": [{"name": "transcode.h264_480p", "price_cents": 20,
	  "runner": {"kind": "transcode", "codec": "h264", "width": 854, "height": 480, "bitrate_kbps": 1200}}]}`), 0o600))
	cat, err = loadCatalogue(good)
	require.NoError(t, err)
	rs, err := agentRunners(cat, []string{"transcode.h264_480p"}, "", "")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	_, err = agentRunners(cat, []string{"synthetic.mp4"}, "", "")
	require.ErrorContains(t, err, `--services: service "synthetic.mp4" is not in the catalogue (available: transcode.h264_480p)`)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"services": [{"name": "x", "price_cents": 1, "runner": {"kind": "ffmpeg", "width": 1280}}]}`), 0o600))
	_, err = loadCatalogue(bad)
	require.ErrorContains(t, err, "--catalogue "+bad+`: service catalogue: service "x" (services[0]): runner.height: want an even number 16..4320, got 0`)
	_, err = loadCatalogue(filepath.Join(dir, "absent.json"))
	require.ErrorContains(t, err, "--catalogue")
}
