package main

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// junitReport is what the test reads of a JUnit XML report.
type junitReport struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Suites   []struct {
		Name  string `xml:"name,attr"`
		Cases []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// TestMakeTestWritesJUnit runs `make test JUNIT=FILE` over a tiny package
// with one passing and one failing test (testdata/junitdemo): make fails
// as the tests do, and the report parses, naming the failure and the pass,
// and the production-build run (server/faultpoint) beside them. Without
// JUNIT, `make test` runs exactly the commands it always ran (after the
// set-up script, .ci/setup).
func TestMakeTestWritesJUnit(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)

	runMake := func(args ...string) *exec.Cmd {
		cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
		cmd.Dir = root
		return cmd
	}
	plain, err := runMake("-n", "test").Output()
	require.NoError(t, err)
	require.Equal(t, "bash .ci/setup\n"+
		"go test -race -count=1 -timeout 14m -tags faultpoints,mutations,docker ./...\n"+
		"go test -count=1 ./server/faultpoint/   # the production build: fault points are no-ops\n", string(plain),
		"make test without JUNIT is unchanged")

	report := filepath.Join(t.TempDir(), "report.xml")
	out, err := runMake("test", "JUNIT="+report, "PKGS=./cmd/rendermac/testdata/junitdemo").CombinedOutput()
	require.Error(t, err, "a failing test fails make test:\n%s", out)
	data, err := os.ReadFile(report)
	require.NoError(t, err, "make output:\n%s", out)
	var r junitReport
	require.NoError(t, xml.Unmarshal(data, &r), "the report is JUnit XML:\n%s", data)

	cases := map[string]bool{} // suite/test -> failed
	for _, s := range r.Suites {
		for _, c := range s.Cases {
			cases[s.Name+"/"+c.Name] = c.Failure != nil
		}
	}
	const demo = "github.com/rendermac/rendermac/cmd/rendermac/testdata/junitdemo/"
	failed, ok := cases[demo+"TestFails"]
	require.True(t, ok && failed, "TestFails recorded as a failure: %v", cases)
	failed, ok = cases[demo+"TestPasses"]
	require.True(t, ok && !failed, "TestPasses recorded as passing: %v", cases)
	require.Equal(t, 1, r.Failures, "exactly the one failure: %v", cases)
	var production bool
	for name, failed := range cases {
		production = production || (strings.HasPrefix(name, "github.com/rendermac/rendermac/server/faultpoint/") && !failed)
	}
	require.True(t, production, "the production-build run is in the report too: %v", cases)
}
