package mutate

func init() { Catalogue = append(Catalogue, contractMutants...) }

// contractMutants break a table of protocol that the model and the server
// share (so the differential campaigns cannot see it; the contract check
// against docs/SPEC.md must), or put a server's time comparison one
// microsecond off the model's (only a tick that lands exactly on the
// boundary shows it).
var contractMutants = []Mutant{
	// Shared tables: killed by qualify's contract check (and, for the token,
	// the campaigns' check of every offered token).
	{ID: "retryable-drops-internal-error", Kind: "contract-table", File: "protocol/codes.go",
		Old: "FailProviderOffline, FailInternalError:", New: "FailProviderOffline:",
		What: "internal_error is no longer retryable: a job whose attempt hit an internal error fails instead of being requeued, in the model and the server alike", Rules: []string{"fail.retryable"}},
	{ID: "max-attempts-bound-11", Kind: "contract-table", File: "protocol/service.go",
		Old: "MaxAttemptsMax     = 10", New: "MaxAttemptsMax     = 11",
		What: "max_attempts 11 is accepted, in the model and the server alike", Rules: []string{"create.validation"}},
	{ID: "job-table-cancelling-succeeds", Kind: "contract-table", File: "protocol/status.go",
		Old: "JobCancelling: {JobCancelled, JobFailed},", New: "JobCancelling: {JobCancelled, JobFailed, JobSucceeded},",
		What: "the job table allows cancelling -> succeeded, which SPEC section 2 makes impossible by construction", Rules: []string{"sm.job-table", "sm.assert-every-write", "inv.3"}},
	{ID: "token-bytes-23", Kind: "contract-token", File: "protocol/token.go",
		Old: "const CommitTokenBytes = 24", New: "const CommitTokenBytes = 23",
		What: "commit tokens carry 23 random bytes (31 characters), not 24", Rules: []string{"token.form"}},
	{ID: "token-alphabet-std", Kind: "contract-token", File: "protocol/token.go",
		Old: "plaintext = base64.RawURLEncoding.EncodeToString(b[:])", New: "plaintext = base64.RawStdEncoding.EncodeToString(b[:])",
		What: "commit tokens are standard base64 (with + and /), not base64url", Rules: []string{"token.form"}},
	// The frame decoder's fast path (protocol/decodefast.go) must refuse
	// what the strict decoder refuses: killed by scenario 83,
	// malformed_frames_refused.
	{ID: "frame-fast-unknown-name-taken", Kind: "contract-decode", File: "protocol/decodefast.go",
		Old:  "\t\tif !ok || seen&(1<<info.index) != 0 || !sc.byte(':') {",
		New:  "\t\tif !ok && sc.byte(':') && sc.skipValue() {\n\t\t\tcontinue\n\t\t}\n\t\tif !ok || seen&(1<<info.index) != 0 || !sc.byte(':') {",
		What: "the fast path skips a member name that is no field's, so a name in another case reaches encoding/json, which matches it to the field", Rules: []string{"wire.strict-decoding"}},
	{ID: "frame-fast-required-unchecked", Kind: "contract-decode", File: "protocol/decodefast.go",
		Old: "\t\tif !present[i] {", New: "\t\tif false && !present[i] {",
		What: "the fast path does not check the required fields, so a frame missing one decodes with its zero value", Rules: []string{"wire.strict-decoding"}},
	// A token source that repeats across runs (as a server seeded from a
	// constant would): every run's tokens are distinct within it, so only
	// the campaign's check for repeats across seeds sees it.
	{ID: "token-stream-ignores-seed", Kind: "contract-token", File: "harness/fuzz/rng.go",
		Old: "Tokens: key(3)}", New: "Tokens: rand.NewChaCha8([32]byte{31: 3})}",
		What: "every seed draws the same commit tokens: a token is offered again in another run", Rules: []string{"token.single-use"}},
	// Time boundaries: the SQL parts < from <= one microsecond off the model.
	{ID: "sweep-lost-after-expiry", Kind: "time-boundary", File: "server/fencing/sweep.go",
		Old: "SQLLeasePhases + ` AND a.lease_expires_at <= $1", New: "SQLLeasePhases + ` AND a.lease_expires_at < $1",
		What: "the sweeper leaves an attempt whose lease expires exactly now live (the model loses it)", Rules: []string{"sweep.lost"}},
	{ID: "sweep-offline-after-window", Kind: "time-boundary", File: "server/fencing/sweep.go",
		Old: "AND last_seen_at <= $1 ORDER BY id", New: "AND last_seen_at < $1 ORDER BY id",
		What: "the sweeper keeps a device online whose heartbeat window ends exactly now (the model marks it offline)", Rules: []string{"sweep.offline"}},
	{ID: "lease-picks-at-deadline", Kind: "time-boundary", File: "server/fencing/lease.go",
		Old: "AND admission_deadline > $2", New: "AND admission_deadline >= $2",
		What: "lease picks a queued job whose admission deadline is exactly now (the model refuses it)", Rules: []string{"lease.deadline"}},
}
