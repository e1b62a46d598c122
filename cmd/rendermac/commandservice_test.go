package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/protocol"
)

// --command-service NAME=FILE gives a catalogue service of runner kind
// "command" its full runner config; a bad pair, a service the catalogue
// lacks or runs with another kind, a bad file or a missing program is a
// start-up error naming the service.
func TestAgentCommandServiceFlag(t *testing.T) {
	t.Parallel()
	cat := append([]protocol.Service{}, protocol.Services...)
	for _, name := range []string{"composition.title", "composition.x", "a", "x"} {
		cat = append(cat, protocol.Service{Name: name, PriceCents: 1, Media: "mp4",
			Runner: protocol.RunnerSpec{Kind: protocol.RunnerCommand, Command: []string{"sh", "-c", "exit 0", "sh", "{output}"}}})
	}
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

	runners, err := agentRunners(cat, []string{"composition.title", "synthetic.mp4"}, "", "composition.title="+good)
	require.NoError(t, err)
	c, ok := runners["composition.title"].(*runner.Command)
	require.True(t, ok, "the service runs the command runner")
	require.Equal(t, 60, c.Config().TimeoutS)
	require.Contains(t, runners, "synthetic.mp4")

	// Configured but not offered: the program is not checked.
	_, err = agentRunners(cat, []string{"synthetic.mp4"}, "", "composition.x="+missing)
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		services []string
		flag     string
		want     string
	}{
		"not in catalogue": {[]string{"synthetic.mp4"}, "composition.y=" + good, `--command-service composition.y: not in the catalogue`},
		"no file":          {[]string{"x"}, "x", `--command-service "x": want NAME=FILE`},
		"no name":          {[]string{"x"}, "=" + good, "want NAME=FILE"},
		"other kind":       {[]string{"synthetic.mp4"}, "synthetic.mp4=" + good, `the catalogue's runner kind is "synthetic", not "command"`},
		"twice":            {[]string{"a"}, "a=" + good + ",a=" + good, "named twice"},
		"unknown key":      {[]string{"a"}, "a=" + typo, `unknown field "timeout"`},
		"absent file":      {[]string{"a"}, "a=" + filepath.Join(dir, "absent.json"), "read command config"},
		"no output":        {[]string{"a"}, "a=" + noOutput, "argv must contain {output}"},
		"missing prog":     {[]string{"a"}, "a=" + missing, "--command-service a: command runner: find rendermac-no-such-renderer on PATH"},
	} {
		_, err := agentRunners(cat, tc.services, "", tc.flag)
		require.ErrorContains(t, err, tc.want, name)
	}
}
