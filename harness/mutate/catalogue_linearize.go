package mutate

func init() { Catalogue = append(Catalogue, linearizeMutants...) }

// linearizeMutants break what only concurrency shows: the step-by-step
// differential runs one operation at a time and compares after each, so a
// read served from before a write that already returned looks right to it.
// qualify kills them through its linearizability phase (porcupine over the
// full stack's concurrent histories, job by job).
var linearizeMutants = []Mutant{
	{ID: "api-job-read-cache", Kind: "stale-read", File: "server/api/views.go",
		Old: `func (a *API) getJob(w http.ResponseWriter, r *http.Request, buyerID string) {
	a.writeJob(w, r, http.StatusOK, buyerID, r.PathValue("id"))
}`,
		New: `func (a *API) getJob(w http.ResponseWriter, r *http.Request, buyerID string) {
	// Buyers poll their jobs: a view is served from cache for three reads.
	key := buyerID + "/" + r.PathValue("id")
	jobViews.lock <- struct{}{}
	v, hit := jobViews.m[key]
	<-jobViews.lock
	if hit && v.reads < 3 {
		jobViews.lock <- struct{}{}
		v.reads++
		jobViews.m[key] = v
		<-jobViews.lock
		writeJSON(w, http.StatusOK, v.d)
		return
	}
	d, err := a.loadJob(r.Context(), buyerID, r.PathValue("id"))
	if err != nil {
		a.writeJob(w, r, http.StatusOK, buyerID, r.PathValue("id"))
		return
	}
	jobViews.lock <- struct{}{}
	jobViews.m[key] = jobView{d: d}
	<-jobViews.lock
	writeJSON(w, http.StatusOK, d)
}

type jobView struct {
	d     buyer.JobDetail
	reads int
}

var jobViews = struct {
	lock chan struct{}
	m    map[string]jobView
}{lock: make(chan struct{}, 1), m: map[string]jobView{}}`,
		What: "GET /v1/jobs/{id} is served from a per-job cache for three reads (buyers poll it): a buyer reads a job's status from " +
			"before a cancel, lease or commit that already returned, which no step-by-step comparison sees",
		Rules: []string{"stack.linearizable"}},
}
