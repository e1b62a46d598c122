// Package pgtest is the TestMain shared by every package whose tests use
// the shared Postgres of internal/pgprovider: run the tests, stop the
// cluster (a failure to stop fails the run), then check for leaked
// goroutines, since servers, pools and connections must all be closed.
package pgtest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/rendermac/rendermac/internal/pgprovider"
)

// Run runs m and returns the exit code for os.Exit. beforeLeakCheck, when
// not nil, runs after the cluster stopped and before goleak looks, for
// releasing what belongs to the test process rather than to the code under
// test (e.g. http.DefaultClient's idle connections).
func Run(m *testing.M, beforeLeakCheck func()) int {
	code := m.Run()
	if err := pgprovider.Shutdown(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "pgprovider shutdown:", err)
		code = 1
	}
	if code != 0 {
		return code
	}
	if beforeLeakCheck != nil {
		beforeLeakCheck()
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		return 1
	}
	return 0
}
