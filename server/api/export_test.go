package api

// Patterns returns the route patterns a's mux registers, and the artifact
// handler's, which is dispatched before the mux (for the OpenAPI drift test).
func (a *API) Patterns() []string {
	return append(append([]string(nil), a.patterns...), routeArtifactGet, routeArtifactPut)
}
