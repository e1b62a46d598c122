//go:build unix

package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/mp4"
)

// The README's quick start, as a newcomer runs it: `go run ./cmd/rendermac
// dev` from the module root, then the commands it prints, pasted into a
// shell: the agent (itself a `go run`), a job submitted with curl, its
// status watched, its output downloaded. The download must be the job's
// MP4. Nothing here knows the server's API beyond what dev prints.
func TestDevQuickStartAsPrinted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)

	dev := exec.Command("go", "run", "./cmd/rendermac", "dev", "--listen", "127.0.0.1:0", "--log-level", "warn")
	dev.Dir = root
	steps := startGroupReading(t, dev)
	welcome := readUntil(t, steps, "Press Ctrl-C")
	agentCmd := lineAfter(t, welcome, "1. Connect an agent")
	require.True(t, strings.HasPrefix(agentCmd, "go run ./cmd/rendermac agent "),
		"from go run, dev prints the agent command as go run too: %q", agentCmd)

	agent := exec.Command("sh", "-c", agentCmd)
	agent.Dir = root
	startGroupReading(t, agent)

	work := t.TempDir()
	script := strings.Join([]string{
		"set -e",
		lineAfter(t, welcome, "2. Submit a job"),
		`test -n "$JOB"`,
		"for i in $(seq 1 600); do",
		"  if " + lineAfter(t, welcome, "3. Watch it") + ` | grep -q '"status":"succeeded"'; then break; fi`,
		"  sleep 0.2",
		"done",
		lineAfter(t, welcome, "4. Download its output"),
	}, "\n")
	sh := exec.CommandContext(ctx, "sh", "-c", script)
	sh.Dir = work
	out, err := sh.CombinedOutput()
	require.NoError(t, err, "the printed commands failed:\n%s\n%s", script, out)

	f, err := os.Open(filepath.Join(work, "demo.mp4"))
	require.NoError(t, err, "step 4 wrote no demo.mp4")
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	_, err = mp4.Check(f, fi.Size())
	require.NoError(t, err, "the downloaded output is the job's MP4")
}

// startGroupReading starts cmd in a process group of its own, stopped with
// SIGTERM (then SIGKILL) when the test ends, and returns its stdout lines.
func startGroupReading(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 256) // more than dev's welcome; later lines may be dropped
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Errorf("%s: %v", cmd.Path, err)
			}
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Errorf("%s did not stop within 30 s of SIGTERM", strings.Join(cmd.Args, " "))
			<-exited
		}
	})
	return lines
}

// readUntil collects lines up to and including the first holding marker.
func readUntil(t *testing.T, lines <-chan string, marker string) []string {
	t.Helper()
	var got []string
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the process ended before printing %q; it printed:\n%s", marker, strings.Join(got, "\n"))
			got = append(got, l)
			if strings.Contains(l, marker) {
				return got
			}
		case <-timeout:
			t.Fatalf("no %q within 3 minutes; printed so far:\n%s", marker, strings.Join(got, "\n"))
		}
	}
}

// lineAfter returns the command on the line after the one starting with
// heading.
func lineAfter(t *testing.T, lines []string, heading string) string {
	t.Helper()
	for i, l := range lines {
		if strings.HasPrefix(l, heading) && i+1 < len(lines) {
			return strings.TrimSpace(lines[i+1])
		}
	}
	t.Fatalf("no %q in dev's welcome:\n%s", heading, strings.Join(lines, "\n"))
	return ""
}
