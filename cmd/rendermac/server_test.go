package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/ratelimit"
)

var requiredServerFlags = []string{"--db", "postgres://x", "--artifacts", "/tmp/a", "--signing-key-file", "/tmp/k"}

func TestServerLimitFlags(t *testing.T) {
	f, err := parseServerFlags(requiredServerFlags, io.Discard)
	require.NoError(t, err)
	require.Equal(t, ratelimit.Limits{}.WithDefaults(), f.limits, "no flags: the defaults")
	require.Equal(t, api.DefaultPairMaxGuesses, f.pairMaxGuesses)

	f, err = parseServerFlags(append(requiredServerFlags, "--limit-jobs-per-buyer", "5/1s", "--limit-pair-per-ip", "off",
		"--limit-connects-per-device", "3/1m", "--pair-max-guesses", "2", "--metrics-listen", "127.0.0.1:9100"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, ratelimit.Rule{N: 5, Per: time.Second}, f.limits.JobsPerBuyer)
	require.True(t, f.limits.PairPerIP.IsOff())
	require.Equal(t, ratelimit.Rule{N: 3, Per: time.Minute}, f.limits.ConnectsPerDevice)
	require.Equal(t, ratelimit.DefaultConnectsPerIP, f.limits.ConnectsPerIP)
	cfg := f.config(nil, nil)
	require.Equal(t, f.limits, cfg.Limits)
	require.Equal(t, 2, cfg.PairMaxGuesses)
	require.Equal(t, "127.0.0.1:9100", cfg.MetricsListen)

	_, err = parseServerFlags(append(requiredServerFlags, "--limit-jobs-per-buyer", "5"), io.Discard)
	require.ErrorContains(t, err, `limit-jobs-per-buyer: rate limit "5": want N/DURATION`)
	_, err = parseServerFlags(append(requiredServerFlags, "--pair-max-guesses", "0"), io.Discard)
	require.ErrorContains(t, err, "--pair-max-guesses must be positive")
}

func TestLoadMetricsToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), mode))
		return p
	}
	hash, err := loadMetricsToken("")
	require.NoError(t, err)
	require.Empty(t, hash, "no file: no token")

	const token = "0123456789abcdef0123"
	hash, err = loadMetricsToken(write("ok", token+"\n", 0o600))
	require.NoError(t, err)
	require.Equal(t, api.HashSecret(token), hash, "only the hash is kept, trailing newline trimmed")

	_, err = loadMetricsToken(write("open", token, 0o640))
	require.ErrorContains(t, err, "readable by group or others")
	_, err = loadMetricsToken(write("short", "abc", 0o600))
	require.ErrorContains(t, err, "at least 16 bytes")
	require.NotContains(t, err.Error(), "abc", "the file's content is not echoed")
	_, err = loadMetricsToken(write("spaces", "two words and more words", 0o600))
	require.ErrorContains(t, err, "without spaces")
	_, err = loadMetricsToken(filepath.Join(dir, "missing"))
	require.ErrorContains(t, err, "metrics token")
}

func TestServerS3Flags(t *testing.T) {
	s3 := []string{"--db", "postgres://x", "--artifacts", "s3://media/farm", "--signing-key-file", "/tmp/k"}
	f, err := parseServerFlags(append(s3, "--s3-endpoint", "http://127.0.0.1:7070", "--s3-path-style"), io.Discard)
	require.NoError(t, err)
	cfg := f.config(nil, nil)
	require.Equal(t, "s3://media/farm", cfg.Artifacts)
	require.Equal(t, "http://127.0.0.1:7070", cfg.S3.Endpoint)
	require.True(t, cfg.S3.PathStyle)

	_, err = parseServerFlags(append(requiredServerFlags, "--s3-path-style"), io.Discard)
	require.ErrorContains(t, err, "apply only to --artifacts s3://")
	_, err = parseServerFlags([]string{"--db", "postgres://x", "--artifacts", "s3://", "--signing-key-file", "/tmp/k"}, io.Discard)
	require.ErrorContains(t, err, "want s3://BUCKET")
}

// --log-format json writes one JSON object a line with slog's keys; text
// writes key=value; anything else is a usage error naming the flag.
func TestServerLogFormat(t *testing.T) {
	f, err := parseServerFlags(requiredServerFlags, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "text", f.logFormat, "the default")
	t.Setenv("RENDERMAC_LOG_FORMAT", "json")
	f, err = parseServerFlags(requiredServerFlags, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "json", f.logFormat, "from the environment")
	f, err = parseServerFlags(append(requiredServerFlags, "--log-format", "text"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "text", f.logFormat, "the flag beats the environment")

	var buf bytes.Buffer
	log, err := newLogger(&buf, "info", "json")
	require.NoError(t, err)
	log.Debug("hidden")
	log.Info("listening", "addr", "127.0.0.1:8080", "n", 3)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), "one JSON object: %q", buf.String())
	require.Equal(t, "INFO", line["level"])
	require.Equal(t, "listening", line["msg"])
	require.Equal(t, "127.0.0.1:8080", line["addr"])
	require.EqualValues(t, 3, line["n"])
	require.Contains(t, line, "time")
	require.Equal(t, 1, strings.Count(buf.String(), "\n"), "debug is below the level")

	buf.Reset()
	log, err = newLogger(&buf, "debug", "text")
	require.NoError(t, err)
	log.Debug("listening", "addr", "x")
	require.Contains(t, buf.String(), `level=DEBUG msg=listening addr=x`)
	require.False(t, json.Valid(buf.Bytes()))

	_, err = newLogger(&buf, "info", "yaml")
	require.ErrorContains(t, err, `--log-format "yaml": want text or json`)
}

// The transport flags: plain HTTP off loopback refused naming the address
// and the flags (either listener), unless --insecure-plaintext; a
// certificate and its key go together; ACME needs the state directory.
func TestServerTransportFlags(t *testing.T) {
	t.Setenv("STATE_DIRECTORY", "")
	key := filepath.Join(t.TempDir(), "k")
	base := []string{"--db", "postgres://x", "--artifacts", t.TempDir(), "--signing-key-file", key}
	for _, tc := range []struct {
		args []string
		want string // "" : accepted
	}{
		{[]string{"--listen", "0.0.0.0:8080"}, "--listen 0.0.0.0:8080: refusing to serve plain HTTP"},
		{[]string{"--listen", "127.0.0.1:8080", "--metrics-listen", ":9100"}, "--metrics-listen :9100"},
		{[]string{"--listen", "render.example.com:8080"}, "--insecure-plaintext"},
		{[]string{"--listen", "0.0.0.0:8080", "--insecure-plaintext"}, ""},
		{[]string{"--listen", "localhost:8080"}, ""},
		{[]string{"--listen", "[::1]:8080"}, ""},
		{[]string{"--listen", "0.0.0.0:8443", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--listen", "0.0.0.0:8443", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, ""},
		{[]string{"--listen", "0.0.0.0:8443", "--acme-domain", "render.example.com"}, "--state-dir"},
		{[]string{"--listen", "0.0.0.0:8443", "--acme-domain", "render.example.com", "--state-dir", "/var/lib/rendermac"}, ""},
		{[]string{"--listen", "0.0.0.0:8443", "--acme-domain", "a.example", "--state-dir", "/s", "--tls-cert", "c", "--tls-key", "k"}, "give one"},
		{[]string{"--acme-email", "ops@example.com"}, "apply only with --acme-domain"},
		{[]string{"--trusted-proxies", "10.0.0.0/8,nonsense"}, `--trusted-proxies: trusted proxy "nonsense"`},
	} {
		_, err := parseServerFlags(append(slices.Clone(base), tc.args...), io.Discard)
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.args)
			continue
		}
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	f, err := parseServerFlags(append(slices.Clone(base), "--acme-domain", "a.example,b.example", "--state-dir", "/var/lib/rendermac",
		"--trusted-proxies", "10.0.0.0/8", "--listen", "0.0.0.0:443"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"a.example", "b.example"}, f.tls.ACME.Domains)
	require.Equal(t, "/var/lib/rendermac/acme", f.tls.ACME.CacheDir)
	require.Equal(t, "10.0.0.0/8", f.trusted.String())
}
