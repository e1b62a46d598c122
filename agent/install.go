package agent

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// LaunchdLabel names the agent's launchd job.
const LaunchdLabel = "dev.rendermac.agent"

// LaunchdJob is what the launchd plist of the agent says: run Program with
// Args for the logged-in user, restart it whenever it exits (KeepAlive),
// its output appended to two log files, with Env.
type LaunchdJob struct {
	Program   string   // absolute path of the rendermac binary
	Args      []string // after the program: "agent" and its flags
	Env       map[string]string
	StdoutLog string
	StderrLog string
	WorkDir   string
	// ExitTimeout is how long launchd waits after its SIGTERM before it
	// sends SIGKILL (ExitTimeOut; launchd's default is 20 s); set it
	// beyond the drain timeout so a drain can finish. 0 leaves it out.
	ExitTimeout time.Duration
}

// LaunchdPaths are where install writes, for a user with home directory
// home: the plist in ~/Library/LaunchAgents, logs in ~/Library/Logs/rendermac.
func LaunchdPaths(home string) (plist, stdoutLog, stderrLog string) {
	logs := filepath.Join(home, "Library", "Logs", "rendermac")
	return filepath.Join(home, "Library", "LaunchAgents", LaunchdLabel+".plist"),
		filepath.Join(logs, "agent.out.log"), filepath.Join(logs, "agent.err.log")
}

// Plist renders the job as a launchd property list (XML, keys sorted in
// the order launchd documents them, environment keys sorted).
func (j LaunchdJob) Plist() []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">` + "\n")
	b.WriteString("<plist version=\"1.0\">\n<dict>\n")
	key := func(k string) { fmt.Fprintf(&b, "\t<key>%s</key>\n", esc(k)) }
	str := func(indent, s string) { fmt.Fprintf(&b, "%s<string>%s</string>\n", indent, esc(s)) }
	key("Label")
	str("\t", LaunchdLabel)
	key("ProgramArguments")
	b.WriteString("\t<array>\n")
	for _, a := range append([]string{j.Program}, j.Args...) {
		str("\t\t", a)
	}
	b.WriteString("\t</array>\n")
	if len(j.Env) > 0 {
		key("EnvironmentVariables")
		b.WriteString("\t<dict>\n")
		names := make([]string, 0, len(j.Env))
		for k := range j.Env {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(&b, "\t\t<key>%s</key>\n", esc(k))
			str("\t\t", j.Env[k])
		}
		b.WriteString("\t</dict>\n")
	}
	if j.WorkDir != "" {
		key("WorkingDirectory")
		str("\t", j.WorkDir)
	}
	key("RunAtLoad")
	b.WriteString("\t<true/>\n")
	key("KeepAlive")
	b.WriteString("\t<true/>\n")
	key("ThrottleInterval") // launchd's floor between restarts
	b.WriteString("\t<integer>10</integer>\n")
	key("ProcessType") // renders are the point: no background throttling
	str("\t", "Interactive")
	if j.ExitTimeout > 0 {
		key("ExitTimeOut") // launchd's SIGTERM-to-SIGKILL grace: the agent's drain
		fmt.Fprintf(&b, "\t<integer>%d</integer>\n", int64((j.ExitTimeout+time.Second-1)/time.Second))
	}
	key("StandardOutPath")
	str("\t", j.StdoutLog)
	key("StandardErrorPath")
	str("\t", j.StderrLog)
	b.WriteString("</dict>\n</plist>\n")
	return b.Bytes()
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// Launchctl runs launchctl with args and returns its combined output. On
// macOS it is ExecLaunchctl; tests record the command lines.
type Launchctl interface {
	Run(args ...string) ([]byte, error)
}

// ExecLaunchctl runs /bin/launchctl.
type ExecLaunchctl struct{}

// Run implements Launchctl.
func (ExecLaunchctl) Run(args ...string) ([]byte, error) {
	return exec.Command("/bin/launchctl", args...).CombinedOutput()
}

// launchdDomain is the job in the user's GUI domain.
func launchdDomain(uid int) string { return "gui/" + strconv.Itoa(uid) }

// InstallLaunchd writes the plist (replacing an installed job: bootout
// first) and loads it: launchctl bootstrap gui/UID PLIST.
func InstallLaunchd(lc Launchctl, uid int, plistPath string, j LaunchdJob) error {
	for _, dir := range []string{filepath.Dir(plistPath), filepath.Dir(j.StdoutLog), filepath.Dir(j.StderrLog)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if _, err := os.Stat(plistPath); err == nil {
		_, _ = lc.Run("bootout", launchdDomain(uid)+"/"+LaunchdLabel) // not loaded is fine
	}
	if err := os.WriteFile(plistPath, j.Plist(), 0o644); err != nil {
		return err
	}
	if out, err := lc.Run("bootstrap", launchdDomain(uid), plistPath); err != nil {
		return fmt.Errorf("launchctl bootstrap: %w: %s", err, out)
	}
	return nil
}

// UninstallLaunchd unloads the job (launchctl bootout gui/UID/LABEL) and
// removes its plist; the logs stay.
func UninstallLaunchd(lc Launchctl, uid int, plistPath string) error {
	if _, err := os.Stat(plistPath); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("not installed: no %s", plistPath)
	}
	if out, err := lc.Run("bootout", launchdDomain(uid)+"/"+LaunchdLabel); err != nil {
		return fmt.Errorf("launchctl bootout: %w: %s", err, out)
	}
	return os.Remove(plistPath)
}

// StatusLaunchd returns launchd's view of the job (launchctl print
// gui/UID/LABEL), or an error saying it is not installed or not loaded.
func StatusLaunchd(lc Launchctl, uid int, plistPath string) ([]byte, error) {
	if _, err := os.Stat(plistPath); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("not installed: no %s", plistPath)
	}
	out, err := lc.Run("print", launchdDomain(uid)+"/"+LaunchdLabel)
	if err != nil {
		return out, fmt.Errorf("installed at %s but not loaded (launchctl print: %w)", plistPath, err)
	}
	return out, nil
}
