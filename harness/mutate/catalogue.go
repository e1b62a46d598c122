package mutate

// Mutant is one small semantic source mutation: in File, the one place
// where Old occurs is replaced by New. Snippets are kept short, so that
// unrelated edits around them do not invalidate the catalogue; Apply fails
// clearly when a snippet no longer matches exactly once.
type Mutant struct {
	ID   string
	Kind string
	File string
	Old  string
	New  string
	What string
	// Rules are the ids of the contract's rules the mutant breaks
	// (docs/SPEC.md and docs/semantics.md, `[R:area.name]`): its kill by
	// qualify alone is what proves qualify checks them.
	Rules []string
	// InForce is, for a mutant of a migration, the definition it edits as
	// server/store/schema.sql prints it, when pg_dump's form differs from
	// the migration's text (default Old): the catalogue test checks it is
	// in force, so a later migration that redefines it cannot leave the
	// mutant editing dead text.
	InForce string
}

// Catalogue is the source mutation campaign's list of mutants.
var Catalogue = []Mutant{
	// Fenced WHERE clauses (a predicate the Go checks do not repeat).
	{ID: "pick-any-service", Kind: "where-predicate", File: "server/fencing/lease.go",
		Old: "AND service = ANY(ARRAY(SELECT unnest($1::text[]) EXCEPT SELECT service FROM paused_services))", New: "AND $1::text[] IS NOT NULL",
		What: "Lease picks a queued job whatever its service: a device is offered work it cannot run", Rules: []string{"lease.service"}},
	{ID: "pick-past-deadline", Kind: "where-predicate", File: "server/fencing/lease.go",
		Old: "AND admission_deadline > $2", New: "AND $2::timestamptz IS NOT NULL",
		What: "Lease picks a queued job past its admission deadline", Rules: []string{"lease.deadline"}},
	{ID: "count-live-all-devices", Kind: "where-predicate", File: "server/fencing/lease.go",
		Old: "WHERE device_id = $1 AND status IN", New: "WHERE $1::text IS NOT NULL AND status IN",
		What: "the slot count counts every device's live attempts, not the leasing device's", Rules: []string{"lease.no-slot", "inv.9"}},
	{ID: "cancel-lock-skips-committing", Kind: "where-predicate", File: "server/fencing/cancel.go",
		Old: "status IN ` + store.SQLLiveStatuses + `\nFOR UPDATE", New: "status IN ` + store.SQLLeasePhases + `\nFOR UPDATE",
		What: "cancelling a verifying job does not find (nor lock) its committing attempt", Rules: []string{"commit.cancel-during-verify", "lock.job-then-attempt"}},
	{ID: "silent-devices-all", Kind: "where-predicate", File: "server/fencing/sweep.go",
		Old: "AND last_seen_at <= $1 ORDER BY id", New: "AND $1::timestamptz IS NOT NULL ORDER BY id",
		What: "the sweeper marks every online device offline, heard from or not", Rules: []string{"sweep.offline"}},
	// Attempt budget, retry rule, deadlines.
	{ID: "budget-off-by-one", Kind: "off-by-one", File: "server/fencing/transitions.go",
		Old: "j.AttemptCount-j.WithdrawnCount < j.MaxAttempts", New: "j.AttemptCount-j.WithdrawnCount <= j.MaxAttempts",
		What: "a failed last attempt is requeued: max_attempts+1 attempts", Rules: []string{"fail.requeue", "inv.5"}},
	{ID: "retry-inverted", Kind: "condition", File: "server/fencing/transitions.go",
		Old: "retryable := code.IsRetryable()", New: "retryable := !code.IsRetryable()",
		What: "retryable failures fail the job and final ones requeue it", Rules: []string{"fail.requeue"}},
	{ID: "requeue-past-deadline", Kind: "condition", File: "server/fencing/transitions.go",
		Old: "retryable && inBudget && st.now.Before(j.AdmissionDeadline)", New: "retryable && inBudget",
		What: "a failed attempt requeues its job past the admission deadline", Rules: []string{"fail.requeue", "inv.5"}},
	{ID: "slots-off-by-one", Kind: "off-by-one", File: "server/fencing/lease.go",
		Old: "if live >= slots {", New: "if live > slots {",
		What: "a device gets one lease more than it has slots", Rules: []string{"lease.no-slot", "inv.9"}},
	// Clocks.
	{ID: "sweep-wall-clock", Kind: "wall-clock", File: "server/fencing/sweep.go",
		Old: "store.ResolveNow(ctx, s.pool, now)", New: "store.ResolveNow(ctx, s.pool, time.Now())",
		What: "the sweeper decides by the wall clock instead of the injected or database clock", Rules: []string{"clock.database-authority"}},
	{ID: "heartbeat-window-sign", Kind: "clock-arith", File: "server/fencing/sweep.go",
		Old: "at(now, -s.cfg.HeartbeatWindow)", New: "at(now, s.cfg.HeartbeatWindow)",
		What: "a device is silent when last seen before now+window, i.e. always", Rules: []string{"sweep.offline"}},
	// Row locks.
	{ID: "lock-job-no-for-update", Kind: "no-for-update", File: "server/fencing/rows.go",
		Old: "FROM jobs WHERE id = $1 FOR UPDATE", New: "FROM jobs WHERE id = $1",
		What: "the job row is read without its lock: concurrent decisions race", Rules: []string{"lock.job-then-attempt"}},
	{ID: "lock-device-no-for-update", Kind: "no-for-update", File: "server/fencing/lease.go",
		Old: "FROM devices WHERE id = $1 FOR UPDATE", New: "FROM devices WHERE id = $1",
		What: "two concurrent leases of one device both see a free slot", Rules: []string{"lease.no-slot"}},
	{ID: "lock-buyer-no-for-update", Kind: "no-for-update", File: "server/fencing/create.go",
		Old: "FROM buyers WHERE id = $1 FOR UPDATE", New: "FROM buyers WHERE id = $1",
		What: "concurrent creates of one buyer race the balance and the idempotency lookup", Rules: []string{"create.hold"}},
	// Schema.
	// 00007 redefines the index (on ended_at IS NULL, for HOT updates);
	// the definition in force is the one to mutate.
	{ID: "no-one-live-index", Kind: "migration", File: "server/store/migrations/00007_hot_attempts.sql",
		Old:     "CREATE UNIQUE INDEX job_attempts_one_live_idx ON job_attempts (job_id) WHERE ended_at IS NULL",
		New:     "CREATE INDEX job_attempts_one_live_idx ON job_attempts (job_id) WHERE ended_at IS NULL",
		InForce: "CREATE UNIQUE INDEX job_attempts_one_live_idx ON public.job_attempts USING btree (job_id) WHERE (ended_at IS NULL)",
		What:    "the partial unique index that allows one live attempt per job is an ordinary index", Rules: []string{"sm.one-live-index"}},
	// Tenancy.
	{ID: "api-get-any-buyer", Kind: "tenancy", File: "server/api/views.go",
		Old: "WHERE j.id = $1 AND j.buyer_id = $2", New: "WHERE j.id = $1 AND $2::text IS NOT NULL",
		What: "GET /v1/jobs/{id} shows another buyer's job", Rules: []string{"tenancy.buyer"}},
	{ID: "api-events-any-buyer", Kind: "tenancy", File: "server/api/views.go",
		Old: "FROM jobs WHERE id = $1 AND buyer_id = $2", New: "FROM jobs WHERE id = $1 AND $2::text IS NOT NULL",
		What: "a job's events are shown to another buyer", Rules: []string{"tenancy.buyer"}},
	{ID: "api-list-any-buyer", Kind: "tenancy", File: "server/api/views.go",
		Old: "WHERE j.buyer_id = $1 AND ($2 = '' OR j.status = $2)", New: "WHERE $1::text IS NOT NULL AND ($2 = '' OR j.status = $2)",
		What: "GET /v1/jobs lists every buyer's jobs", Rules: []string{"tenancy.buyer"}},
	{ID: "api-cursor-any-buyer", Kind: "tenancy", File: "server/api/cursor.go",
		Old: `return "jobs\x00" + buyerID + "\x00" + status`, New: `return "jobs\x00" + "\x00" + status`,
		What: "a jobs cursor's tag does not cover the buyer: another buyer's cursor is accepted", Rules: []string{"api.cursor-tamper"}},
	{ID: "cancel-any-buyer", Kind: "tenancy", File: "server/fencing/cancel.go",
		Old: "case !jobOK || j.BuyerID != buyerID:", New: "case !jobOK:",
		What: "a buyer can cancel another buyer's job", Rules: []string{"tenancy.buyer"}},
	{ID: "api-key-revocation-ignored", Kind: "auth", File: "server/api/auth.go",
		Old: "AND revoked_at IS NULL", New: "",
		What: "a revoked API key still authenticates", Rules: []string{"api.key-revoked"}},
	// Grants.
	{ID: "grant-key-unsigned", Kind: "grant-scope", File: "server/grant/grant.go",
		Old: `"%s\n%s\n%d", op, key, exp`, New: `"%s\n%d", op, exp`,
		What: "a grant's signature does not cover the key: one grant opens every artifact", Rules: []string{"grant.scoped"}},
	{ID: "grant-expiry-unchecked", Kind: "grant-expiry", File: "server/grant/grant.go",
		Old: "if !now.Before(time.Unix(exp, 0)) {", New: "if false {",
		What: "an expired grant is still accepted", Rules: []string{"grant.scoped"}},
	// Money and idempotency.
	{ID: "idempotency-no-fingerprint", Kind: "idempotency", File: "server/fencing/create.go",
		Old: "case buyer.existing && buyer.existingFingerprint == fingerprint:", New: "case buyer.existing:",
		What: "a reused idempotency key with a different request returns the first job instead of a conflict", Rules: []string{"create.idempotency", "create.fingerprint"}},
	{ID: "release-without-credit", Kind: "money", File: "server/fencing/transitions.go",
		Old: "WHEN $2 = 'released' THEN h.amount_cents", New: "WHEN $2 = 'released' THEN 0",
		What: "a released hold is settled without crediting the buyer's balance", Rules: []string{"terminal.settle", "inv.7"}},
	// Commit and verification.
	{ID: "verify-ignores-claimed-key", Kind: "verification", File: "server/fencing/commit.go",
		Old: "status != protocol.AttemptCommitting || claimed.Key != key", New: "status != protocol.AttemptCommitting",
		What: "verification checks the object at the attempt's key, not the key the agent claimed", Rules: []string{"verify.size-hash"}},
	{ID: "commit-ignores-verdict", Kind: "verification", File: "server/fencing/commit.go",
		Old: "case !verified:", New: "case false:",
		What: "commit transaction 2 succeeds the job whatever verification found", Rules: []string{"commit.verification-failed", "commit.finish-order", "inv.3"}},
	{ID: "commit-after-expiry", Kind: "fence", File: "server/fencing/commit.go",
		Old: "case a.Status == protocol.AttemptUploading && !st.now.Before(a.LeaseExpiresAt):", New: "case false:",
		What: "commit accepts an attempt whose lease has expired", Rules: []string{"commit.lease-expired"}},
	{ID: "token-unchecked", Kind: "fence", File: "server/fencing/commit.go",
		Old: "tokenOK := protocol.VerifyCommitToken(token, a.TokenHash)", New: "tokenOK := true",
		What: "commit and fail accept any commit token", Rules: []string{"fence.identity", "commit.fence", "fail.fence"}},
	{ID: "sweep-trusts-abandoned-commit", Kind: "verification", File: "server/fencing/sweep.go",
		Old: "p.jobID, p.attemptID, ok, protocol.ActorSweeper", New: "p.jobID, p.attemptID, ok || true, protocol.ActorSweeper",
		What: "the sweeper succeeds an abandoned commit without its verification verdict", Rules: []string{"commit.reverify"}},
	// Progress.
	{ID: "progress-after-expiry", Kind: "fence", File: "server/fencing/progress.go",
		Old: "case !r.now.Before(*r.expiresAt):", New: "case false:",
		What: "progress's checks accept a lease that has already expired", Rules: []string{"progress.fence"}},
	{ID: "progress-phase-regression", Kind: "fence", File: "server/fencing/progress.go",
		Old: "case protocol.PhaseRank(p.Phase) < protocol.PhaseRank(*r.status):", New: "case false:",
		What: "progress's checks accept a move back to an earlier phase", Rules: []string{"progress.fence"}},
	{ID: "progress-write-any-epoch", Kind: "where-predicate", File: "server/fencing/progress.go",
		Old: "AND x.lease_epoch = $4", New: "AND $4::int IS NOT NULL",
		What: "progress's fenced write ignores the lease epoch (its checks still refuse a stale one)", Rules: []string{"ident.lease-epoch"}},
	// Webhooks.
	{ID: "webhook-failure-not-retried", Kind: "webhook", File: "server/webhook/deliver.go",
		Old: "d.exec(ctx, sqlFailed, w.ID, w.Attempts, msg, next)", New: "d.exec(ctx, sqlDelivered, w.ID, at, nil)",
		What: "a failed webhook POST is recorded delivered and never retried", Rules: []string{"webhook.retry"}},
	// Gateway.
	{ID: "gateway-release-before-decision", Kind: "slot", File: "server/gateway/frames.go",
		Old:  "onCommit(m *protocol.Commit) {\n\tr, err := s.retry(func(ctx context.Context) (protocol.Reply, error) {\n\t\treturn s.g.svc.Commit(",
		New:  "onCommit(m *protocol.Commit) {\n\ts.release()\n\tr, err := s.retry(func(ctx context.Context) (protocol.Reply, error) {\n\t\treturn s.g.svc.Commit(",
		What: "the gateway frees the slot (and offers) before the commit's deciding transaction", Rules: []string{"order.result-before-offer", "order.slot-after-commit", "inv.9"}},
	{ID: "gateway-offer-any-service", Kind: "slot", File: "server/gateway/offer.go",
		Old: "s.slotsFree-s.promised <= 0 ||\n\t\t!slices.Contains(s.services, service)", New: "s.slotsFree-s.promised <= 0 ||\n\t\t(!slices.Contains(s.services, service) && false)",
		What: "the gateway promises a slot to a session whatever services it runs", Rules: []string{"lease.service"}},
}
