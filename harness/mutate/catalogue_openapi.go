package mutate

func init() { Catalogue = append(Catalogue, openAPIMutants...) }

// openAPIMutants break the API's agreement with its OpenAPI document
// (server/api/openapi.json, SPEC section 6): the document is not where the
// contract says, or not what it says it is, or a response leaves the shape
// the document gives it. Scenario openapi_document kills them: it fetches
// the document and every API step of the catalogue validates its exchange
// against it.
var openAPIMutants = []Mutant{
	{ID: "api-openapi-route-moved", Kind: "route", File: "server/api/api.go",
		Old: `a.handle("GET /v1/openapi.json", a.openAPI)`, New: `a.handle("GET /v1/openapi", a.openAPI)`,
		What: "the document is served at /v1/openapi, so GET /v1/openapi.json answers 404", Rules: []string{"api.openapi-document"}},
	{ID: "api-openapi-content-type", Kind: "content-type", File: "server/api/openapi.go",
		Old: `h.Set("Content-Type", "application/json")`, New: `h.Set("Content-Type", "text/plain; charset=utf-8")`,
		What: "the document is served as text/plain, not application/json", Rules: []string{"api.openapi-document"}},
	{ID: "api-attempt-count-omitted", Kind: "wire-shape", File: "protocol/buyer/buyer.go",
		Old: "`json:\"attempt_count\"`", New: "`json:\"attempt_count,omitempty\"`",
		What: "a job without attempts is sent without attempt_count, which the document requires", Rules: []string{"api.openapi-document"}},
}
