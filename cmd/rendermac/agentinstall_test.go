package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/harness/testca"
)

// recordingLaunchctl records each launchctl command line; fail makes the
// subcommands it names fail.
type recordingLaunchctl struct {
	calls []string
	fail  map[string]bool
}

func (r *recordingLaunchctl) Run(args ...string) ([]byte, error) {
	r.calls = append(r.calls, "launchctl "+strings.Join(args, " "))
	if r.fail[args[0]] {
		return []byte("Could not find service"), errors.New("exit status 113")
	}
	return []byte("state = running\n"), nil
}

// plistDict decodes the top-level dict of a plist into key -> the XML of
// its value, failing on XML that is not well-formed.
func plistDict(t *testing.T, data []byte) map[string]string {
	t.Helper()
	var doc struct {
		Dict struct {
			Inner []byte `xml:",innerxml"`
		} `xml:"dict"`
	}
	require.NoError(t, xml.Unmarshal(data, &doc))
	dec := xml.NewDecoder(bytes.NewReader(doc.Dict.Inner))
	out := map[string]string{}
	key := ""
	depth := 0
	var val strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch tk := tok.(type) {
		case xml.StartElement:
			if depth == 0 && tk.Name.Local == "key" {
				key = ""
			}
			depth++
			if depth > 1 || tk.Name.Local != "key" {
				val.WriteString("<" + tk.Name.Local + ">")
			}
		case xml.EndElement:
			depth--
			if depth > 0 || tk.Name.Local != "key" {
				val.WriteString("</" + tk.Name.Local + ">")
			}
			if depth == 0 && tk.Name.Local != "key" {
				out[key] = val.String()
				val.Reset()
			}
		case xml.CharData:
			if depth == 1 && key == "" && val.Len() == 0 {
				key = string(tk)
			} else if s := strings.TrimSpace(string(tk)); s != "" {
				val.WriteString(s)
			}
		}
	}
	return out
}

// On Linux the launchd commands run against a recording launchctl: the
// plist's content and the exact command lines are checked.
func TestAgentInstallUninstallStatus(t *testing.T) {
	home := t.TempDir()
	for _, v := range []string{"RENDERMAC_CONFIG", "RENDERMAC_SERVICES", "RENDERMAC_SLOTS", "RENDERMAC_WORK", "RENDERMAC_TOKEN_FILE"} {
		t.Setenv(v, "")
	}
	lc := &recordingLaunchctl{}
	h := launchdHost{goos: "darwin", lc: lc, uid: 501, home: home, exe: "/usr/local/bin/rendermac",
		environ: []string{"RENDERMAC_LOG_LEVEL=debug", "OTHER=x", "RENDERMAC_EMPTY="}}
	plist := filepath.Join(home, "Library", "LaunchAgents", "dev.rendermac.agent.plist")
	var out bytes.Buffer
	args := []string{"--services", "ffmpeg.h264_720p", "--slots", "2", "--work", "/Users/r/work"}

	require.NoError(t, runAgentService(h, "install", args, &out, io.Discard))
	require.Equal(t, []string{"launchctl bootstrap gui/501 " + plist}, lc.calls)
	data, err := os.ReadFile(plist)
	require.NoError(t, err)
	t.Logf("generated plist:\n%s", data)
	d := plistDict(t, data)
	require.Equal(t, "<string>dev.rendermac.agent</string>", d["Label"])
	require.Equal(t, "<array><string>/usr/local/bin/rendermac</string><string>agent</string><string>--services</string>"+
		"<string>ffmpeg.h264_720p</string><string>--slots</string><string>2</string><string>--work</string><string>/Users/r/work</string></array>",
		d["ProgramArguments"])
	require.Equal(t, "<true></true>", d["KeepAlive"])
	require.Equal(t, "<true></true>", d["RunAtLoad"])
	require.Equal(t, "<integer>315</integer>", d["ExitTimeOut"], "launchd waits out the default 5m drain, 5s shutdown and a margin before SIGKILL")
	require.Equal(t, "<string>"+filepath.Join(home, "Library/Logs/rendermac/agent.out.log")+"</string>", d["StandardOutPath"])
	require.Equal(t, "<string>"+filepath.Join(home, "Library/Logs/rendermac/agent.err.log")+"</string>", d["StandardErrorPath"])
	require.Equal(t, "<dict><key>PATH</key><string>"+launchdPATH+"</string><key>RENDERMAC_LOG_LEVEL</key><string>debug</string></dict>",
		d["EnvironmentVariables"], "PATH and the installer's non-empty RENDERMAC_* variables, nothing else")
	require.DirExists(t, filepath.Join(home, "Library/Logs/rendermac"))

	// Installing again replaces the loaded job.
	lc.calls = nil
	require.NoError(t, runAgentService(h, "install", args, &out, io.Discard))
	require.Equal(t, []string{"launchctl bootout gui/501/dev.rendermac.agent", "launchctl bootstrap gui/501 " + plist}, lc.calls)

	lc.calls = nil
	out.Reset()
	require.NoError(t, runAgentService(h, "status", nil, &out, io.Discard))
	require.Equal(t, []string{"launchctl print gui/501/dev.rendermac.agent"}, lc.calls)
	require.Equal(t, "state = running\n", out.String())

	lc.calls = nil
	require.NoError(t, runAgentService(h, "uninstall", nil, &out, io.Discard))
	require.Equal(t, []string{"launchctl bootout gui/501/dev.rendermac.agent"}, lc.calls)
	require.NoFileExists(t, plist)

	lc.calls = nil
	require.ErrorContains(t, runAgentService(h, "status", nil, &out, io.Discard), "not installed")
	require.ErrorContains(t, runAgentService(h, "uninstall", nil, &out, io.Discard), "not installed")
	require.Empty(t, lc.calls, "nothing to ask launchd")

	// Refusals: a pairing code, bad agent flags, a failing bootstrap, Linux.
	require.ErrorContains(t, runAgentService(h, "install", append(args, "--pair", "C"), &out, io.Discard), "pair first")
	require.ErrorContains(t, runAgentService(h, "install", []string{"--slots", "2"}, &out, io.Discard), "--services is required")
	lc.fail = map[string]bool{"bootstrap": true}
	require.ErrorContains(t, runAgentService(h, "install", args, &out, io.Discard), "launchctl bootstrap: exit status 113")
	h.goos = "linux"
	require.ErrorContains(t, runAgentService(h, "status", nil, &out, io.Discard), "macOS only")
	require.Equal(t, agent.LaunchdLabel, "dev.rendermac.agent")
}

// `rendermac agent install` carries --ca-file, --server-pin and
// --insecure-plaintext into the job, and checks the CA file and the pin
// now, since launchd would only show a bad one in its log; a relative CA
// path is refused (the job runs from the home directory).
func TestAgentInstallCarriesTransportFlags(t *testing.T) {
	home := t.TempDir()
	for _, v := range []string{"RENDERMAC_CONFIG", "RENDERMAC_SERVICES", "RENDERMAC_SLOTS", "RENDERMAC_WORK", "RENDERMAC_TOKEN_FILE",
		"RENDERMAC_CA_FILE", "RENDERMAC_SERVER_PIN", "RENDERMAC_INSECURE_PLAINTEXT"} {
		t.Setenv(v, "")
	}
	ca, err := testca.New("install CA")
	require.NoError(t, err)
	caFile, err := ca.WriteCA(home, "ca")
	require.NoError(t, err)
	h := launchdHost{goos: "darwin", lc: &recordingLaunchctl{}, uid: 501, home: home, exe: "/usr/local/bin/rendermac",
		environ: []string{"RENDERMAC_SERVER_PIN=" + agent.PinOf(ca.Cert)}}
	base := []string{"--services", "synthetic.mp4", "--work", "/Users/r/work"}
	job, err := launchdJob(h, append(base, "--ca-file", caFile), io.Discard)
	require.NoError(t, err)
	require.Equal(t, append([]string{"agent"}, append(base, "--ca-file", caFile)...), job.Args)
	require.Equal(t, agent.PinOf(ca.Cert), job.Env["RENDERMAC_SERVER_PIN"], "the environment form is carried too")

	_, err = launchdJob(h, append(base, "--ca-file", "ca.pem"), io.Discard)
	require.ErrorContains(t, err, "absolute path")
	_, err = launchdJob(h, append(base, "--ca-file", filepath.Join(home, "missing.pem")), io.Discard)
	require.ErrorContains(t, err, "--ca-file")
	_, err = launchdJob(h, append(base, "--server-pin", "sha256/short"), io.Discard)
	require.ErrorContains(t, err, "--server-pin")
}
