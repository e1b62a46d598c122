package e2e

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/rendermac/rendermac/internal/pgtest"
	"github.com/rendermac/rendermac/internal/s3provider"
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
	// agent.Pair uses http.DefaultClient; its idle keep-alive connection
	// is the client's, not a leak of the code under test.
	// The S3 tests share one versitygw process; it goes with the tests.
	os.Exit(pgtest.Run(m, func() {
		fmt.Println(openAPI().Summary())
		http.DefaultClient.CloseIdleConnections()
		if err := s3provider.Shutdown(); err != nil {
			panic(err)
		}
	}))
}
