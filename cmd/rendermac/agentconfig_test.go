package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent"
)

// Flags beat RENDERMAC_* variables, which beat the config file.
func TestAgentConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"services": "synthetic.mp4", "slots": 3, "work": "/file/work",
		"token-file": "/file/device.json", "log-level": "warn", "name": "from-file", "drain-timeout": "90s"}`), 0o600))
	for _, v := range []string{"RENDERMAC_SERVICES", "RENDERMAC_SLOTS", "RENDERMAC_WORK", "RENDERMAC_TOKEN_FILE",
		"RENDERMAC_LOG_LEVEL", "RENDERMAC_NAME", "RENDERMAC_SERVER", "RENDERMAC_FFMPEG", "RENDERMAC_DRAIN_TIMEOUT"} {
		t.Setenv(v, "")
	}
	t.Setenv("RENDERMAC_CONFIG", cfg)

	f, err := parseAgentFlags(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, agentFlags{services: "synthetic.mp4", slots: 3, work: "/file/work", tokenFile: "/file/device.json",
		logLevel: "warn", name: "from-file", config: cfg, logFormat: "text", minFreeMB: agent.DefaultMinFreeBytes >> 20,
		pingInterval: agent.DefaultPingInterval, pingTimeout: agent.DefaultPingTimeout, drainTimeout: 90 * time.Second}, f,
		"the file alone")

	t.Setenv("RENDERMAC_SLOTS", "5")
	t.Setenv("RENDERMAC_WORK", "/env/work")
	t.Setenv("RENDERMAC_SERVER", "https://env.example")
	t.Setenv("RENDERMAC_DRAIN_TIMEOUT", "2m")
	f, err = parseAgentFlags(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, f.drainTimeout, "env beats file")
	require.Equal(t, 5, f.slots, "env beats file")
	require.Equal(t, "/env/work", f.work)
	require.Equal(t, "https://env.example", f.server, "env alone")
	require.Equal(t, "warn", f.logLevel, "file where env is silent")

	f, err = parseAgentFlags([]string{"--slots", "2", "--work", "/flag/work"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 2, f.slots, "flag beats env")
	require.Equal(t, "/flag/work", f.work)
	require.Equal(t, "/file/device.json", f.tokenFile)

	// A flag set to its default still wins over env and file.
	f, err = parseAgentFlags([]string{"--slots", "1"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 1, f.slots)

	t.Setenv("RENDERMAC_SLOTS", "many")
	_, err = parseAgentFlags(nil, io.Discard)
	require.ErrorContains(t, err, `RENDERMAC_SLOTS: --slots "many"`)
	t.Setenv("RENDERMAC_SLOTS", "")

	require.NoError(t, os.WriteFile(cfg, []byte(`{"servcies": "synthetic.mp4"}`), 0o600))
	_, err = parseAgentFlags([]string{"--services", "synthetic.mp4"}, io.Discard)
	require.ErrorContains(t, err, `config file: unknown setting "servcies"`)
	require.NoError(t, os.WriteFile(cfg, []byte(`{"pair": "CODE-1"}`), 0o600))
	_, err = parseAgentFlags([]string{"--services", "synthetic.mp4"}, io.Discard)
	require.ErrorContains(t, err, `unknown setting "pair"`, "a pairing code is single use: flags only")
}

// The transport flags have the environment and config-file forms of every
// agent flag: RENDERMAC_CA_FILE, RENDERMAC_SERVER_PIN,
// RENDERMAC_INSECURE_PLAINTEXT; "ca-file", "server-pin",
// "insecure-plaintext".
func TestAgentTransportSettingsLayered(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"services": "synthetic.mp4", "work": "/w", "ca-file": "/file/ca.pem",
		"server-pin": "sha256/file", "insecure-plaintext": true}`), 0o600))
	for _, v := range []string{"RENDERMAC_SERVICES", "RENDERMAC_WORK", "RENDERMAC_CA_FILE", "RENDERMAC_SERVER_PIN", "RENDERMAC_INSECURE_PLAINTEXT"} {
		t.Setenv(v, "")
	}
	t.Setenv("RENDERMAC_CONFIG", cfg)
	f, err := parseAgentFlags(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, agent.Transport{CAFile: "/file/ca.pem", ServerPin: "sha256/file", InsecurePlaintext: true}, f.transport())

	t.Setenv("RENDERMAC_CA_FILE", "/env/ca.pem")
	t.Setenv("RENDERMAC_INSECURE_PLAINTEXT", "false")
	f, err = parseAgentFlags([]string{"--server-pin", "sha256/flag"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, agent.Transport{CAFile: "/env/ca.pem", ServerPin: "sha256/flag"}, f.transport(), "flags beat env, env beats the file")
}
