package e2e

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/rendermac/rendermac/internal/pgprovider"
)

// TestMain runs the child agent when this binary was re-executed as one
// (see child_test.go); otherwise it runs the tests, stops the shared
// Postgres cluster and checks that no goroutine outlived them: every test
// stops its control plane (pools, listener, gateway loops, deliverer) and
// its agents, so whatever is left is a leak. Nothing is ignored.
func TestMain(m *testing.M) {
	if os.Getenv(envChildAgent) != "" {
		os.Exit(runChildAgent())
	}
	code := m.Run()
	if err := pgprovider.Shutdown(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "pgprovider shutdown:", err)
		code = 1
	}
	if code == 0 {
		// agent.Pair uses http.DefaultClient; its idle keep-alive
		// connection is the client's, not a leak of the code under test.
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
