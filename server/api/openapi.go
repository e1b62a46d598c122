package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 document of this API (SPEC section
// 6): every route of Handler under /v1 but the device WebSocket, and
// /healthz, /readyz and /metrics. A test checks that it names exactly the
// routes the mux registers, and the API tests and the end-to-end tests
// validate every request and response they make against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument returns a copy of the API's OpenAPI 3.1 document.
func OpenAPIDocument() []byte { return append([]byte(nil), openAPIDocument...) }

// openAPI is GET /v1/openapi.json: the document, to anyone.
func (a *API) openAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDocument)
}
