package mutate

// opsMutants break the operations rules: the abuse limits and their order
// (server/ratelimit, server/api, server/gateway), pairing codes' form and
// lookup, /metrics' access, listener, token and gauges, traces, the
// operators' console, webhook retries and secrets in logs. qualify kills
// them through scenarios 240 to 252 and 46/47 (pairing), and the secrets
// check every scenario ends with.
var opsMutants = []Mutant{
	// Abuse limits.
	{ID: "limit-pair-not-taken", Kind: "abuse-limit", File: "server/api/pair.go",
		Old:   "if ok, wait := a.limits.pair.Allow(ratelimit.IPKey(r.RemoteAddr)); !ok {",
		New:   "if ok, wait := a.limits.pair.Check(ratelimit.IPKey(r.RemoteAddr)); !ok {",
		What:  "POST /v1/provider/pair only peeks at the client IP's bucket and never takes from it: pairing is unlimited (killed by limit_pair_per_ip)",
		Rules: []string{"limit.pair-per-ip"}},
	{ID: "limit-default-pair-doubled", Kind: "abuse-limit", File: "server/ratelimit/limits.go",
		Old:   "DefaultPairPerIP = Rule{N: 10, Per: time.Minute}",
		New:   "DefaultPairPerIP = Rule{N: 20, Per: time.Minute}",
		What:  "the default pairing limit is 20 a minute, not the SPEC's 10 (killed by limit_defaults)",
		Rules: []string{"limit.pair-per-ip"}},
	{ID: "limit-default-device-hourly", Kind: "abuse-limit", File: "server/ratelimit/limits.go",
		Old:   "DefaultConnectsPerDevice = Rule{N: 10, Per: time.Minute}",
		New:   "DefaultConnectsPerDevice = Rule{N: 10, Per: time.Hour}",
		What:  "the default device connection limit refills 10 an hour, not 10 a minute: a device back from a crash loop waits six minutes (killed by limit_defaults)",
		Rules: []string{"limit.connects-per-device"}},
	{ID: "limit-retry-after-floor", Kind: "abuse-limit", File: "server/ratelimit/keyed.go",
		Old:   "s := int64((d + time.Second - 1) / time.Second)",
		New:   "s := int64(d / time.Second)",
		What:  "Retry-After is rounded down: a client that waits it is refused again (killed by limit_pair_per_ip)",
		Rules: []string{"limit.429"}},
	{ID: "limit-wall-clock", Kind: "wall-clock", File: "server/ratelimit/keyed.go",
		Old:   "\tnow := k.clock.Now()\n\tr := k.bucket(key, now).ReserveN(now, 1)",
		New:   "\tnow := time.Now()\n\tr := k.bucket(key, now).ReserveN(now, 1)",
		What:  "buckets are judged at the wall clock instead of the limiter's injected clock (killed by limit_pair_per_ip)",
		Rules: []string{"limit.clock"}},
	{ID: "limit-decision-clock", Kind: "wall-clock", File: "server/api/api.go",
		Old:   "\tcfg.Limits = cfg.Limits.WithDefaults()\n",
		New:   "\tcfg.Limits = cfg.Limits.WithDefaults()\n\tcfg.Limits.Clock = cfg.Clock\n",
		What:  "the API judges its buckets at the decision clock: a pinned clock moved an hour refills every bucket (killed by limit_pair_per_ip)",
		Rules: []string{"limit.clock"}},
	{ID: "limit-auth-failure-not-counted", Kind: "abuse-limit", File: "server/api/auth.go",
		Old:   "\t\t\ta.limits.authFailures.Allow(ip)\n\t\t\tunauthorized(w, \"unknown or revoked API key\")",
		New:   "\t\t\tunauthorized(w, \"unknown or revoked API key\")",
		What:  "unknown and revoked API keys are not counted: key guessing is unlimited (killed by limit_auth_failures)",
		Rules: []string{"limit.auth-failures-per-ip"}},
	{ID: "limit-auth-key-before-bucket", Kind: "check-order", File: "server/api/auth.go",
		Old: "\t\tif ok, wait := a.limits.authFailures.Check(ip); !ok {\n" +
			"\t\t\ta.refuse(w, limitAuthFailures, \"failed API-key authentications from this address\", wait)\n" +
			"\t\t\treturn\n\t\t}\n\t\tvar buyerID string\n" +
			"\t\terr := a.pool.QueryRow(r.Context(), sqlBuyerByKey, HashSecret(key)).Scan(&buyerID)\n",
		New: "\t\tvar buyerID string\n" +
			"\t\terr := a.pool.QueryRow(r.Context(), sqlBuyerByKey, HashSecret(key)).Scan(&buyerID)\n" +
			"\t\tif ok, wait := a.limits.authFailures.Check(ip); !ok && err != nil {\n" +
			"\t\t\ta.refuse(w, limitAuthFailures, \"failed API-key authentications from this address\", wait)\n" +
			"\t\t\treturn\n\t\t}\n",
		What:  "the key is looked up before the spent bucket is consulted, and a valid key passes it: every guess costs a query and the IP is never locked out (killed by limit_auth_failures)",
		Rules: []string{"limit.auth-order"}},
	{ID: "limit-auth-missing-key-counted", Kind: "check-order", File: "server/api/auth.go",
		Old: "\t\tif key == \"\" {\n\t\t\tunauthorized(w, \"missing bearer API key\")\n\t\t\treturn\n\t\t}\n" +
			"\t\tip := ratelimit.IPKey(r.RemoteAddr)\n",
		New: "\t\tip := ratelimit.IPKey(r.RemoteAddr)\n" +
			"\t\tif key == \"\" {\n\t\t\ta.limits.authFailures.Allow(ip)\n\t\t\tunauthorized(w, \"missing bearer API key\")\n\t\t\treturn\n\t\t}\n",
		What:  "a request without a key counts as a failed authentication: a browser's anonymous requests lock its address out (killed by limit_auth_failures)",
		Rules: []string{"limit.auth-order"}},
	{ID: "limit-jobs-per-address", Kind: "abuse-limit", File: "server/api/jobs.go",
		Old:   "\tif ok, wait := a.limits.jobs.Allow(buyerID); !ok {\n\t\ta.refuse(w, limitJobs, \"job creations by this buyer\", wait)\n\t\treturn\n\t}\n\treq, input",
		New:   "\tif ok, wait := a.limits.jobs.Allow(r.RemoteAddr); !ok {\n\t\ta.refuse(w, limitJobs, \"job creations by this buyer\", wait)\n\t\treturn\n\t}\n\treq, input",
		What:  "the job-creation bucket is the client address's, not the buyer's: a buyer spreading requests over addresses escapes it (killed by limit_jobs_per_buyer)",
		Rules: []string{"limit.jobs-per-buyer"}},
	{ID: "limit-jobs-after-body", Kind: "check-order", File: "server/api/jobs.go",
		Old: "\tif ok, wait := a.limits.jobs.Allow(buyerID); !ok {\n\t\ta.refuse(w, limitJobs, \"job creations by this buyer\", wait)\n\t\treturn\n\t}\n" +
			"\treq, input, why, rerr := a.readCreate(w, r, buyerID)\n\tif rerr != nil {\n\t\trerr.write(w)\n\t\treturn\n\t}\n",
		New: "\treq, input, why, rerr := a.readCreate(w, r, buyerID)\n\tif rerr != nil {\n\t\trerr.write(w)\n\t\treturn\n\t}\n" +
			"\tif ok, wait := a.limits.jobs.Allow(buyerID); !ok {\n\t\ta.refuse(w, limitJobs, \"job creations by this buyer\", wait)\n\t\treturn\n\t}\n",
		What:  "the body is read before the buyer's bucket takes one: malformed requests are not counted (killed by limit_jobs_per_buyer)",
		Rules: []string{"limit.jobs-order"}},
	{ID: "limit-connects-ip-not-taken", Kind: "abuse-limit", File: "server/gateway/gateway.go",
		Old:   "if ok, wait := g.connectsPerIP.Allow(ratelimit.IPKey(r.RemoteAddr)); !ok {",
		New:   "if ok, wait := g.connectsPerIP.Check(ratelimit.IPKey(r.RemoteAddr)); !ok {",
		What:  "device connection attempts never take from the client IP's bucket: token guessing at the upgrade is unlimited (killed by limit_connects)",
		Rules: []string{"limit.connects-per-ip"}},
	{ID: "limit-connects-device-not-taken", Kind: "abuse-limit", File: "server/gateway/gateway.go",
		Old:   "if ok, wait := g.connectsPerDevice.Allow(deviceID); !ok {",
		New:   "if ok, wait := g.connectsPerDevice.Check(deviceID); !ok {",
		What:  "a device's sessions never take from its bucket: a device in a crash loop says hello without bound (killed by limit_connects)",
		Rules: []string{"limit.connects-per-device"}},
	{ID: "limit-connect-token-first", Kind: "check-order", File: "server/gateway/gateway.go",
		Old: "\tif ok, wait := g.connectsPerIP.Allow(ratelimit.IPKey(r.RemoteAddr)); !ok {\n" +
			"\t\tg.m.RateLimited.WithLabelValues(\"connects_per_ip\").Inc()\n" +
			"\t\tratelimit.Refuse(w, \"device connections from this address\", wait)\n\t\treturn\n\t}\n" +
			"\tdeviceID, err := g.authenticate(r.Context(), r.Header.Get(\"Authorization\"))\n",
		New: "\tdeviceID, err := g.authenticate(r.Context(), r.Header.Get(\"Authorization\"))\n" +
			"\tif ok, wait := g.connectsPerIP.Allow(ratelimit.IPKey(r.RemoteAddr)); !ok && err == nil {\n" +
			"\t\tg.m.RateLimited.WithLabelValues(\"connects_per_ip\").Inc()\n" +
			"\t\tratelimit.Refuse(w, \"device connections from this address\", wait)\n\t\treturn\n\t}\n",
		What:  "the token is looked up before the client IP's bucket is judged: a guesser from one address gets an answer to every guess (killed by limit_connects)",
		Rules: []string{"limit.connect-order"}},
	{ID: "limit-forget-most-recent", Kind: "abuse-limit", File: "server/ratelimit/keyed.go",
		Old:   "\t\tk.drop(k.lru.Back())\n",
		New:   "\t\tk.drop(k.lru.Front())\n",
		What:  "a full limiter forgets its most recently used key instead of its least recently used one (killed by limit_memory)",
		Rules: []string{"limit.memory"}},
	{ID: "limit-max-keys-small", Kind: "abuse-limit", File: "server/ratelimit/keyed.go",
		Old:   "const DefaultMaxKeys = 100_000",
		New:   "const DefaultMaxKeys = 10_000",
		What:  "a limit remembers 10,000 keys, not 100,000: a flood from 10,000 addresses lets every spent client in again (killed by limit_memory)",
		Rules: []string{"limit.memory"}},
	// Pairing codes.
	{ID: "pair-code-case-sensitive", Kind: "pairing", File: "server/api/operator.go",
		Old:   "}, strings.ToUpper(strings.TrimSpace(code)))",
		New:   "}, strings.TrimSpace(code))",
		What:  "a pairing code typed in lower case is another code: the right code, typed, is refused (killed by pairing_code_form)",
		Rules: []string{"pair.code-form"}},
	{ID: "pair-lookup-id-only", Kind: "pairing", File: "server/api/pair.go",
		Old:   "WHERE code_id = $1 OR (code_id IS NULL AND code_hash = $2) FOR UPDATE",
		New:   "WHERE code_id = $1 OR (code_id IS NOT NULL AND code_hash = $2) FOR UPDATE",
		What:  "a code minted before ids existed (no code_id) is never found: it can no longer pair (killed by pairing_code_form)",
		Rules: []string{"pair.lookup"}},
	// /metrics.
	{ID: "metrics-any-peer", Kind: "metrics-access", File: "server/api/api.go",
		Old:   "a.guardMetrics(a.cfg.MetricsTokenHash == \"\")",
		New:   "a.guardMetrics(false)",
		What:  "/metrics on the API listener answers any peer without a token (killed by metrics_access)",
		Rules: []string{"metrics.access"}},
	{ID: "metrics-on-api-listener", Kind: "metrics-access", File: "server/api/api.go",
		Old:   "\tif !a.cfg.MetricsElsewhere {\n",
		New:   "\tif true {\n",
		What:  "with --metrics-listen the API listener still serves /metrics (killed by metrics_access)",
		Rules: []string{"metrics.listener"}},
	{ID: "metrics-token-group-readable", Kind: "metrics-access", File: "server/api/metricstoken.go",
		Old:   "if perm := fi.Mode().Perm(); perm&0o077 != 0 {",
		New:   "if perm := fi.Mode().Perm(); perm&0o007 != 0 {",
		What:  "a metrics token file its group can read is accepted (killed by metrics_access)",
		Rules: []string{"metrics.token"}},
	{ID: "gauges-youngest-queued", Kind: "gauges", File: "server/store/gauges.go",
		Old:   "extract(epoch FROM coalesce($1::timestamptz, now()) - min(created_at))::float8",
		New:   "extract(epoch FROM coalesce($1::timestamptz, now()) - max(created_at))::float8",
		What:  "rendermac_queued_oldest_age_seconds is the youngest queued job's age (killed by metrics_gauges)",
		Rules: []string{"metrics.gauges"}},
	{ID: "gauges-devices-any-status", Kind: "gauges", File: "server/store/gauges.go",
		Old:   "`SELECT count(*) FROM devices WHERE status = '` + string(protocol.DeviceOnline) + `'`,",
		New:   "`SELECT count(*) FROM devices WHERE status <> '` + string(protocol.DeviceRevoked) + `'`,",
		What:  "rendermac_devices_online counts offline devices too (killed by metrics_gauges)",
		Rules: []string{"metrics.gauges"}},
	{ID: "gauges-ended-counts-unended", Kind: "gauges", File: "server/store/gauges.go",
		Old:   "\t\t\trows -= n\n",
		New:   "\t\t\t_ = n\n",
		What:  "rendermac_jobs_ended_estimate is the whole jobs table's row count, the unended jobs counted as ended (killed by metrics_gauges)",
		Rules: []string{"metrics.gauges"}},
	// Traces.
	{ID: "trace-background-statements", Kind: "traces", File: "server/telemetry/telemetry.go",
		Old:   "\tif !trace.SpanFromContext(ctx).SpanContext().IsValid() {\n\t\treturn ctx // no parent: a background loop's statement\n\t}\n",
		New:   "",
		What:  "the background loops' statements make root spans of their own (killed by trace_otlp)",
		Rules: []string{"trace.otlp"}},
	{ID: "trace-session-route", Kind: "traces", File: "server/telemetry/telemetry.go",
		Old:   "otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != sessionPath }),",
		New:   "otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != \"\" }),",
		What:  "the device session route is traced (killed by trace_otlp)",
		Rules: []string{"trace.otlp"}},
	// The console.
	{ID: "console-credential-stored-plain", Kind: "console", File: "server/console/auth.go",
		Old:   "if _, err := pool.Exec(ctx, sqlInsertOperator, id, name, api.HashSecret(credential)); err != nil {",
		New:   "if _, err := pool.Exec(ctx, sqlInsertOperator, id, name, credential); err != nil {",
		What:  "an operator credential is stored in the clear (killed by console_auth)",
		Rules: []string{"console.credential"}},
	{ID: "console-revoked-session-lives", Kind: "console", File: "server/console/auth.go",
		Old:   "sqlOperatorLive    = `SELECT true FROM operators WHERE id = $1 AND revoked_at IS NULL`",
		New:   "sqlOperatorLive    = `SELECT true FROM operators WHERE id = $1`",
		What:  "a revoked operator's session cookies keep opening the console until they expire (killed by console_auth)",
		Rules: []string{"console.session"}},
	{ID: "console-session-untagged", Kind: "console", File: "server/console/auth.go",
		Old:   "\tif !hmac.Equal(tag, c.sessionTag(body)) {\n\t\treturn \"\", false\n\t}\n",
		New:   "\tif len(tag) != sessionTagSize {\n\t\treturn \"\", false\n\t}\n",
		What:  "a session cookie's tag is checked for its length, not its value: a cookie with its expiry pushed on is accepted (killed by console_auth)",
		Rules: []string{"console.unauthenticated"}},
	{ID: "console-device-token-unknown", Kind: "console", File: "server/console/auth.go",
		Old:   "for _, q := range []string{sqlBuyerKeyExists, sqlDeviceKeyExists} {",
		New:   "for _, q := range []string{sqlBuyerKeyExists} {",
		What:  "a device token at the console is 401 as if unknown, not 403 (killed by console_auth)",
		Rules: []string{"console.forbidden"}},
	{ID: "console-failures-not-counted", Kind: "console", File: "server/console/auth.go",
		Old:   "\tdefault:\n\t\tc.failures.Allow(ip)\n",
		New:   "\tdefault:\n",
		What:  "wrong operator credentials presented as bearer secrets are not counted: guessing is unlimited (killed by console_auth)",
		Rules: []string{"console.auth-limit"}},
	{ID: "console-remote-with-credential", Kind: "console", File: "server/console/auth.go",
		Old:   "\t\tif !c.cfg.Remote && !api.FromLoopback(r) {\n\t\t\tc.refuse(w, r, http.StatusForbidden,\n",
		New:   "\t\tif !c.cfg.Remote && !api.FromLoopback(r) && bearer(r) == \"\" {\n\t\t\tc.refuse(w, r, http.StatusForbidden,\n",
		What:  "a peer off loopback that presents a credential reaches the console without --console-remote (killed by console_auth)",
		Rules: []string{"console.remote"}},
	{ID: "console-attempt-device-hash", Kind: "console", File: "server/console/data.go",
		Old:   "SELECT a.id::text, a.attempt_number, a.status, a.device_id::text, d.name, a.lease_epoch,",
		New:   "SELECT a.id::text, a.attempt_number, a.status, a.device_id::text, d.token_hash, a.lease_epoch,",
		What:  "a job page's attempts name their device by its token hash (killed by console_pages)",
		Rules: []string{"console.no-secrets"}},
	{ID: "console-events-no-jobs", Kind: "console", File: "server/console/live.go",
		Old:   "h.publish(change{Jobs: slices.Compact(jobs)})",
		New:   "h.publish(change{})",
		What:  "console change events no longer name the jobs that changed (killed by console_pages)",
		Rules: []string{"console.events"}},
	{ID: "console-card-overwrite", Kind: "console", File: "server/console/cards.go",
		Old:   "os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644",
		New:   "os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644",
		What:  "an uploaded card overwrites the card of its name (killed by console_pages)",
		Rules: []string{"console.cards-upload"}},
	// Webhooks.
	{ID: "webhook-retry-5xx-only", Kind: "webhook", File: "server/webhook/deliver.go",
		Old:   "if resp.StatusCode/100 != 2 {",
		New:   "if resp.StatusCode/100 == 5 {",
		What:  "only a 5xx answer is retried: a redirect or a 4xx counts as delivered (killed by webhook_retry_every_failure)",
		Rules: []string{"webhook.retry"}},
	// Secrets stored.
	{ID: "token-stored-reversible", Kind: "secret-stored", File: "protocol/token.go",
		Old: tokenStoredSpan("HashCommitToken(plaintext)"),
		New: tokenStoredSpan("hex.EncodeToString([]byte(plaintext))"),
		What: "a commit token's stored form is the plaintext hex-encoded (and a presented token is compared in that form), " +
			"not its SHA-256: 64 lowercase hex characters like a hash, commits still verify, but the database holds the token itself " +
			"(killed by the contract's commit token table)",
		Rules: []string{"token.hash-only"}},
	// Secrets in logs.
	{ID: "gateway-logs-offer", Kind: "secret-logged", File: "server/gateway/offer.go",
		Old:   "\ts.log.Info(\"lease offered\", \"job_id\", r.JobID, \"attempt_id\", r.AttemptID, \"attempt_number\", r.AttemptNumber)\n",
		New:   "\ts.log.Info(\"lease offered\", \"job_id\", r.JobID, \"attempt_id\", r.AttemptID, \"attempt_number\", r.AttemptNumber)\n\ts.log.Debug(\"offer\", \"reply\", r)\n",
		What:  "the gateway logs the lease reply whole at debug level, commit token included (killed by the secrets check after every scenario)",
		Rules: []string{"token.single-use"}},
}

func init() { Catalogue = append(Catalogue, opsMutants...) }

// tokenStoredSpan is protocol/token.go from NewCommitToken's return to
// VerifyCommitToken's hashing of the presented token, with stored (an
// expression of plaintext) as the form both store and compare.
func tokenStoredSpan(stored string) string {
	return "\treturn plaintext, " + stored + ", nil\n}\n\n" +
		"// HashCommitToken is the stored form of a token: hex(sha256(plaintext)).\n" +
		"func HashCommitToken(plaintext string) string {\n" +
		"\tsum := sha256.Sum256([]byte(plaintext))\n" +
		"\treturn hex.EncodeToString(sum[:])\n}\n\n" +
		"// VerifyCommitToken reports whether plaintext hashes to storedHash. The\n" +
		"// comparison is constant-time in the hash so that timing tells an attacker\n" +
		"// nothing about how much of a guess was right.\n" +
		"// An empty plaintext never verifies: no token is the absence of a capability.\n" +
		"func VerifyCommitToken(plaintext, storedHash string) bool {\n" +
		"\tif plaintext == \"\" {\n\t\treturn false\n\t}\n" +
		"\tgot := " + stored + "\n"
}
