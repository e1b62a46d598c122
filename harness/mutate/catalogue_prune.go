package mutate

// pruneMutants break retention (SPEC section 3, Prune; docs/semantics.md,
// "Retention"): the differential campaigns draw prunes and compare them
// with the model, and scenario prune_races_commit_and_download looks at
// the store and the buyer's download URL around one.
var pruneMutants = []Mutant{
	{ID: "prune-non-terminal", Kind: "retention", File: "server/fencing/prune.go",
		Old: "    WHERE e.kind = 'job' AND e.to_status IN ('succeeded', 'cancelled', 'failed') AND e.at < $1\n" +
			"      AND j.status IN ('succeeded', 'cancelled', 'failed')\n    ORDER BY e.at, e.id LIMIT $2",
		New:   "    WHERE e.to_status IN ('succeeded', 'cancelled', 'failed') AND e.at < $1\n    ORDER BY e.at, e.id LIMIT $2",
		What:  "prune picks any journal row that ended something, an attempt's too, and never looks at the job's status: a job requeued after a failed attempt, queued or running again, is deleted with its hold",
		Rules: []string{"retention.finished-only"}},
	{ID: "prune-ignores-age", Kind: "retention", File: "server/fencing/prune.go",
		Old:   "AND e.at < $1\n      AND j.status IN ('succeeded', 'cancelled', 'failed')\n    ORDER BY e.at, e.id LIMIT $2",
		New:   "AND e.at < $1::timestamptz + interval '1 day'\n      AND j.status IN ('succeeded', 'cancelled', 'failed')\n    ORDER BY e.at, e.id LIMIT $2",
		What:  "a day's grace meant to keep jobs longer is added to the bound the wrong way round: every job finished up to a day after the bound, however recently, is pruned",
		Rules: []string{"retention.age-bound"}},
	{ID: "prune-keeps-journal", Kind: "retention", File: "server/fencing/prune.go",
		Old:   "DELETE FROM job_events x USING v WHERE x.job_id = v.id RETURNING 1",
		New:   "DELETE FROM job_events x USING v WHERE x.job_id = v.id AND x.kind = 'job' RETURNING 1",
		What:  "prune deletes a job's own journal rows and leaves its attempts' rows; the foreign keys refuse the batch, so no finished job is ever pruned whole",
		Rules: []string{"retention.whole-history"}},
	{ID: "prune-forgets-objects", Kind: "retention", File: "server/fencing/prune.go",
		Old:   "for _, k := range objectKeys(s.store, key) {",
		New:   "for _, k := range objectKeys(s.store, key)[:0] {",
		What:  "prune deletes the rows and dequeues the keys but never deletes the objects: a pruned job's input and output stay in the store and its download URL keeps serving",
		Rules: []string{"retention.objects"}},
	{ID: "prune-loses-captures", Kind: "retention", File: "server/fencing/prune.go",
		Old:   "SELECT jo.buyer_id, coalesce(sum(ho.amount_cents) FILTER (WHERE ho.status = 'captured'), 0), count(*), now()",
		New:   "SELECT jo.buyer_id, 0, count(*), now()",
		What:  "prune deletes captured holds without recording them as pruned: the buyer's captured cents no longer add up",
		Rules: []string{"retention.ledger-kept"}},
	{ID: "invariants-ignore-pruned", Kind: "retention", File: "server/store/invariants.go",
		Old:   "OR b.captured_cents <> h.captured + p.captured`},",
		New:   "OR b.captured_cents <> h.captured`},",
		What:  "the conservation check forgets the pruned captures: a pruned database reports invariant 7 broken",
		Rules: []string{"retention.invariants"}},
	{ID: "download-deleted-is-error", Kind: "retention", File: "server/api/artifacts.go",
		Old:   "\tif errors.Is(err, artifact.ErrNotFound) {\n\t\twriteError(w, http.StatusNotFound, \"not_found\", \"no artifact at this key\")",
		New:   "\tif errors.Is(err, artifact.ErrNotFound) && false {\n\t\twriteError(w, http.StatusNotFound, \"not_found\", \"no artifact at this key\")",
		What:  "a download whose object is gone (a pruned job's) answers 500 internal_error instead of 404 not_found",
		Rules: []string{"retention.download-race"}},
}

func init() { Catalogue = append(Catalogue, pruneMutants...) }
