package e2e

import (
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/openapicheck"
	"github.com/rendermac/rendermac/server/api"
)

// openAPI validates every exchange of the stacks' buyer clients and agents
// with the control plane against the API's OpenAPI document
// (server/api/openapi.json); TestMain prints its total.
var openAPI = sync.OnceValue(func() *openapicheck.Checker {
	c, err := openapicheck.New(api.OpenAPIDocument(), openapicheck.ControlPlane)
	if err != nil {
		panic(err)
	}
	return c
})

// checkOpenAPI puts client's transport behind a session of openAPI for the
// requests to base's host; the test fails, when it ends, on any exchange
// that disagrees with the document.
func checkOpenAPI(t *testing.T, client *http.Client, base string) {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	s := openAPI().Session()
	t.Cleanup(func() {
		for _, f := range s.Failures() {
			t.Errorf("%s", f)
		}
		t.Log(s.Summary())
	})
	client.Transport = s.Transport(client.Transport, u.Host)
}
