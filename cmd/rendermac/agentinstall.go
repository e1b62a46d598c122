package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rendermac/rendermac/agent"
)

// agentServiceCommands are `rendermac agent install | uninstall | status`.
var agentServiceCommands = []string{"install", "uninstall", "status"}

// agentServiceUsage is the --help of uninstall and status (install's is the
// agent's flags).
var agentServiceUsage = map[string]string{
	"uninstall": "macOS: unload the launchd agent (launchctl bootout) and remove its plist; its logs are kept.",
	"status":    "macOS: print the launchd agent's state (launchctl print).",
}

// launchdHost is what the launchd commands need of the machine; tests
// give their own (Linux runs them with a recording launchctl).
type launchdHost struct {
	goos    string
	lc      agent.Launchctl
	uid     int
	home    string
	exe     string
	environ []string
}

func realLaunchdHost() (launchdHost, error) {
	h := launchdHost{goos: runtime.GOOS, lc: agent.ExecLaunchctl{}, uid: os.Getuid(), environ: os.Environ()}
	var err error
	if h.home, err = os.UserHomeDir(); err != nil {
		return h, err
	}
	if h.exe, err = os.Executable(); err != nil {
		return h, err
	}
	h.exe, err = filepath.EvalSymlinks(h.exe)
	return h, err
}

// launchdPATH finds ffmpeg from Homebrew (Apple Silicon, then Intel) as
// well as the system's tools; launchd's default PATH has only the latter.
const launchdPATH = "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

// runAgentService runs install, uninstall or status against h.
func runAgentService(h launchdHost, cmd string, args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && isHelp(args[0]) {
		if cmd == "install" { // install takes the agent's flags
			_, err := parseAgentFlags(args, stderr)
			return err
		}
		return helpError{fmt.Sprintf("Usage: rendermac agent %s\n\n%s\n", cmd, agentServiceUsage[cmd])}
	}
	if h.goos != "darwin" {
		return usageError{fmt.Sprintf("agent %s manages a launchd agent, which exists on macOS only (this is %s)", cmd, h.goos)}
	}
	plist, outLog, errLog := agent.LaunchdPaths(h.home)
	switch cmd {
	case "install":
		job, err := launchdJob(h, args, stderr)
		if err != nil {
			return err
		}
		if err := agent.InstallLaunchd(h.lc, h.uid, plist, job); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "installed and loaded %s\nlogs: %s, %s\n", plist, outLog, errLog)
		return nil
	case "uninstall":
		if len(args) > 0 {
			return usageError{"agent uninstall takes no arguments"}
		}
		if err := agent.UninstallLaunchd(h.lc, h.uid, plist); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "unloaded and removed %s (logs kept)\n", plist)
		return nil
	default:
		if len(args) > 0 {
			return usageError{"agent status takes no arguments"}
		}
		out, err := agent.StatusLaunchd(h.lc, h.uid, plist)
		_, _ = stdout.Write(out)
		return err
	}
}

// launchdExitMargin is added to the drain and shutdown bounds in the
// plist's ExitTimeOut, for the process's own exit.
const launchdExitMargin = 10 * time.Second

// launchdJob checks the agent flags as `rendermac agent` would and makes
// the job that runs them: the same flags, the installer's RENDERMAC_*
// variables and a PATH that finds Homebrew's ffmpeg.
func launchdJob(h launchdHost, args []string, stderr io.Writer) (agent.LaunchdJob, error) {
	if slices.ContainsFunc(args, func(a string) bool { return a == "--pair" || strings.HasPrefix(a, "--pair=") }) {
		return agent.LaunchdJob{}, usageError{"pair first (rendermac agent --server URL --pair CODE ...), then install without --pair: a code is single use"}
	}
	f, err := parseAgentFlags(args, stderr)
	if err != nil {
		return agent.LaunchdJob{}, err
	}
	// launchd runs the job from the home directory, and a CA file or pin
	// that does not load would only show in its log: check them now.
	if f.caFile != "" && !filepath.IsAbs(f.caFile) {
		return agent.LaunchdJob{}, usageError{fmt.Sprintf("--ca-file %s: give an absolute path, the installed job does not run from here", f.caFile)}
	}
	if _, err := f.transport().TLSConfig(); err != nil {
		return agent.LaunchdJob{}, usageError{err.Error()}
	}
	env := map[string]string{"PATH": launchdPATH}
	for _, kv := range h.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "RENDERMAC_") && v != "" {
			env[k] = v
		}
	}
	_, outLog, errLog := agent.LaunchdPaths(h.home)
	return agent.LaunchdJob{Program: h.exe, Args: append([]string{"agent"}, args...), Env: env,
		StdoutLog: outLog, StderrLog: errLog, WorkDir: h.home,
		// launchd's SIGTERM starts the drain; its SIGKILL must not cut it short.
		ExitTimeout: f.drainTimeout + agent.DefaultShutdownTimeout + launchdExitMargin}, nil
}
