package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
)

// --command-service NAME=FILE adds a command runner the agent may offer; a
// bad pair, a clash with a built-in name, a bad file or a missing program is
// a start-up error naming the service.
func TestAgentCommandServiceFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	good := write("title.json", `{"argv":["sh","-c","exit 0","sh","{params}","{output}"],"timeout_s":60}`)
	missing := write("missing.json", `{"argv":["rendermac-no-such-renderer","{output}"]}`)
	typo := write("typo.json", `{"argv":["sh","{output}"],"timeout":60}`)
	noOutput := write("noout.json", `{"argv":["sh","{params}"]}`)

	runners, err := agentRunners([]string{"composition.title", "synthetic.mp4"}, "", "composition.title="+good)
	require.NoError(t, err)
	c, ok := runners["composition.title"].(*runner.Command)
	require.True(t, ok, "the service runs the command runner")
	require.Equal(t, 60, c.Config().TimeoutS)
	require.Contains(t, runners, "synthetic.mp4")

	// Configured but not offered: the program is not checked.
	_, err = agentRunners([]string{"synthetic.mp4"}, "", "composition.x="+missing)
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		services []string
		flag     string
		want     string
	}{
		"not configured": {[]string{"composition.title"}, "", `unknown service "composition.title" (available: ffmpeg.h264_1080p, ffmpeg.h264_720p, synthetic.mp4)`},
		"no file":        {[]string{"x"}, "x", `--command-service "x": want NAME=FILE`},
		"no name":        {[]string{"x"}, "=" + good, "want NAME=FILE"},
		"builtin name":   {[]string{"synthetic.mp4"}, "synthetic.mp4=" + good, "the name of a built-in service"},
		"twice":          {[]string{"a"}, "a=" + good + ",a=" + good, "named twice"},
		"unknown key":    {[]string{"a"}, "a=" + typo, `unknown field "timeout"`},
		"absent file":    {[]string{"a"}, "a=" + filepath.Join(dir, "absent.json"), "read command config"},
		"no output":      {[]string{"a"}, "a=" + noOutput, "argv must contain {output}"},
		"missing prog":   {[]string{"a"}, "a=" + missing, "--command-service a: command runner: find rendermac-no-such-renderer on PATH"},
	} {
		_, err := agentRunners(tc.services, "", tc.flag)
		require.ErrorContains(t, err, tc.want, name)
	}
}
