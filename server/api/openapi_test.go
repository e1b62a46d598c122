package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/openapicheck"
	"github.com/rendermac/rendermac/server/api"
)

// notDescribed are the routes the OpenAPI document leaves out on purpose:
// the device WebSocket (SPEC section 5), the operators' console (its own
// pages) and the mux's catch-all (the JSON 404/405 of every other path).
var notDescribed = []string{"GET /v1/provider/ws", "/console", "/console/", "/"}

// openAPI is the package's checker: every test's bundle validates its
// exchanges in a session of it, and TestMain prints its total.
var openAPI = sync.OnceValue(func() *openapicheck.Checker {
	c, err := openapicheck.New(api.OpenAPIDocument(), openapicheck.ControlPlane)
	if err != nil {
		panic(err)
	}
	return c
})

// checkOpenAPI returns h behind a session of the package's checker; the
// test fails, when it ends, on any exchange that disagrees with the
// document. Register it before the server's Close, so it runs after.
func checkOpenAPI(t *testing.T, h http.Handler) http.Handler {
	s := openAPI().Session()
	t.Cleanup(func() {
		for _, f := range s.Failures() {
			t.Errorf("%s", f)
		}
		t.Log(s.Summary())
	})
	return s.Handler(h)
}

// The document is served to anyone, as JSON, byte for byte the embedded one.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodGet, "/v1/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.Equal(t, api.OpenAPIDocument(), r.Body)
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
}

// documentOperations returns the document's operations as "METHOD /path".
func documentOperations(t *testing.T) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPIDocument(), &doc))
	var ops []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops = append(ops, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// The document and the mux name the same routes: every route the API
// registers is described (but the few left out on purpose), and every
// operation described is registered. The artifact handler's one pattern
// per method stands for the artifact key shapes the document lists.
func TestOpenAPIRoutesMatchMux(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const artifacts = "/v1/artifacts/"
	var registered []string
	for _, p := range b.api.Patterns() {
		if slices.Contains(notDescribed, p) {
			continue
		}
		method, path, ok := strings.Cut(p, " ")
		require.True(t, ok, "route %q has no method: describe it per method", p)
		if strings.HasPrefix(path, artifacts) {
			path = artifacts + "*"
		}
		registered = append(registered, method+" "+path)
		if method == http.MethodGet && strings.HasPrefix(path, artifacts) {
			registered = append(registered, "HEAD "+path) // the artifact handler serves HEAD as GET
		}
	}
	slices.Sort(registered)
	registered = slices.Compact(registered)
	var described []string
	for _, op := range documentOperations(t) {
		method, path, _ := strings.Cut(op, " ")
		if strings.HasPrefix(path, artifacts) {
			path = artifacts + "*"
		}
		described = append(described, method+" "+path)
	}
	slices.Sort(described)
	described = slices.Compact(described)
	var missing, extra []string
	for _, r := range registered {
		if !slices.Contains(described, r) {
			missing = append(missing, r)
		}
	}
	for _, d := range described {
		if !slices.Contains(registered, d) {
			extra = append(extra, d)
		}
	}
	require.Empty(t, missing, "routes the mux registers that server/api/openapi.json does not describe")
	require.Empty(t, extra, "operations server/api/openapi.json describes that the mux does not register")
	require.NotEmpty(t, registered)
}

// The check can fail: a server whose answers break the document in each
// way the checker looks for is caught, once per bad exchange, and a
// documented answer is not.
func TestOpenAPICheckCatchesViolations(t *testing.T) {
	t.Parallel()
	const jobPath = "/v1/jobs/00000000-0000-4000-8000-000000000001"
	const job = `{"id":"00000000-0000-4000-8000-000000000001","status":"queued","service":"synthetic.mp4","params":{},` +
		`"input":{"bytes":0,"sha256":""},"max_attempts":3,"attempt_count":0,"created_at":"2030-01-02T03:04:05Z",` +
		`"admission_deadline":"2030-01-02T04:04:05Z","updated_at":"2030-01-02T03:04:05Z","attempts":[]`
	answers := map[string]struct {
		status int
		body   string
		bad    string // what the checker must say, "" for a documented answer
	}{
		"documented":            {http.StatusOK, job + `}`, ""},
		"documented-error":      {http.StatusNotFound, `{"code":"not_found","message":"no such job"}`, ""},
		"wrong-type":            {http.StatusOK, strings.Replace(job, `"attempt_count":0`, `"attempt_count":"0"`, 1) + `}`, "response 200"},
		"undocumented-field":    {http.StatusOK, job + `,"commit_token":"x"}`, "response 200"},
		"undocumented-status":   {http.StatusTeapot, `{"code":"not_found","message":"teapot"}`, "response 418"},
		"undocumented-code":     {http.StatusNotFound, `{"code":"gone","message":"no such job"}`, "response 404"},
		"error-without-message": {http.StatusNotFound, `{"code":"not_found"}`, "response 404"},
	}
	c, err := openapicheck.New(api.OpenAPIDocument(), openapicheck.ControlPlane)
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[r.Header.Get("X-Answer")]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		fmt.Fprint(w, a.body)
	})))
	defer srv.Close()
	send := func(method, path, key, answer string) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		req.Header.Set("X-Answer", answer)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	var want []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range answers {
			if !yield(k) {
				return
			}
		}
	}) {
		send(http.MethodGet, jobPath, "rmk_key", name)
		if answers[name].bad != "" {
			want = append(want, "GET "+jobPath+" -> "+fmt.Sprint(answers[name].status)+": "+answers[name].bad)
		}
	}
	// A request the document refuses (no API key) that the server accepts.
	send(http.MethodGet, jobPath, "", "documented")
	want = append(want, "GET "+jobPath+" -> 200: the document refuses the request")
	// An operation the document lacks, answered 200 rather than 404/405.
	send(http.MethodDelete, jobPath, "rmk_key", "documented")
	want = append(want, "DELETE "+jobPath+" -> 200: an operation the document lacks, answered 200, not a 4xx")
	// The same, answered with the error shape: accepted.
	send(http.MethodDelete, jobPath, "rmk_key", "documented-error")

	failures := c.Failures()
	require.Len(t, failures, len(want), "failures: %s", strings.Join(failures, "\n"))
	for _, w := range want {
		require.True(t, slices.ContainsFunc(failures, func(f string) bool { return strings.HasPrefix(f, w) }),
			"no failure starting %q among:\n%s", w, strings.Join(failures, "\n"))
	}
	n := c.Counts()
	require.Equal(t, openapicheck.Counts{Requests: len(answers) + 3, Responses: len(answers) + 3, Refused: 1, Undocumented: 2,
		Failing: len(want)}, n, c.Summary())
	t.Log(c.Summary())
}
