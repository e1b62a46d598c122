//go:build faultpoints && unix

package faultpoint_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/faultpoint"
)

const helperEnv = "FAULTPOINT_TEST_HELPER"

// TestHelperProcess is the child of TestKillFromEnv: it arms itself from
// the environment, as `rendermac server` does, and hits the point.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	if err := faultpoint.EnableFromEnv(); err != nil {
		os.Stderr.WriteString("enable: " + err.Error() + "\n")
		os.Exit(3)
	}
	faultpoint.Hit(context.Background(), faultpoint.CommitAfterTx1)
	faultpoint.Hit(context.Background(), faultpoint.CommitBeforeTx2)
	os.Stderr.WriteString("survived the kill point\n")
	os.Exit(0)
}

// kill from the environment ends the process by SIGKILL at the point,
// after announcing it, and not a moment earlier.
func TestKillFromEnv(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", faultpoint.EnvVar+"="+faultpoint.CommitBeforeTx2+"=kill")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "helper: %v\n%s", err, stderr.String())
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled(), "exit: %v\n%s", err, stderr.String())
	require.Equal(t, syscall.SIGKILL, ws.Signal())
	require.Contains(t, stderr.String(), "faultpoint commit.before_tx2: kill")
	require.NotContains(t, stderr.String(), "survived")
}
