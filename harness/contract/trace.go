package contract

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// A check names one thing `rendermac qualify` runs that can fail a rule:
//
//	campaign:NAME       a differential campaign (model, model-vs-postgres,
//	                    model-vs-postgres-vs-stack): every reply compared,
//	                    the rows compared, SPEC section 4 checked after
//	                    every step (docs/semantics.md, "Campaign comparisons")
//	campaign-tokens     every campaign's commit-token form and repeat check
//	contract:TABLE      one of protocol's tables compared with the text
//	                    (Result.Table)
//	scenario:NAME       a named scenario (its script's `rules:` header names
//	                    its rules; a check here adds one, e.g. NAME@s3 for its
//	                    run on a real S3 server)
//	fleet:ID            one of the fleet campaign's checks (fleet.CheckIDs)
//	qualify:NAME        a check qualify runs in process on its own (Checks)
//
// Traced is the table from each rule to the checks outside the scenario
// scripts that reach it; the scripts' headers add theirs. A rule reached by
// no check of either is a failure of qualify, unless NotCheckable says why
// it cannot be checked here.
var Traced = map[string][]string{
	// Section 1: identities, the commit token, the fence.
	"ident.attempt-row":              {pg, stack},
	"ident.lease-epoch":              {pg, stack},
	"token.form":                     {"contract:commit token size, alphabet and hash", "campaign-tokens"},
	"token.hash-only":                {pg, "contract:commit token size, alphabet and hash"},
	"token.single-use":               {"campaign-tokens"},
	"fence.identity":                 {pg, stack},
	"fence.mismatch-mutates-nothing": {pg, stack},
	// Section 2: the state machines.
	"sm.job-table":          {"contract:job statuses and transitions", pg},
	"sm.attempt-table":      {"contract:attempt statuses, phase ranks, live and terminal", "contract:attempt transitions", pg},
	"sm.assert-every-write": {"contract:job statuses and transitions", pg},
	// Section 3: the operations (compared reply by reply and row by row).
	"clock.database-authority":     {pg, stack},
	"create.validation":            {pg, stack, "contract:max_attempts bounds and default", "contract:admission window bounds"},
	"create.hold":                  {pg, stack},
	"create.idempotency":           {pg, stack},
	"create.deadline":              {pg, stack},
	"lease.oldest-first":           {pg, stack},
	"lease.service":                {pg, stack},
	"lease.deadline":               {pg, stack},
	"lease.attempt":                {pg, stack},
	"lease.offer":                  {pg, stack},
	"progress.fence":               {pg, stack},
	"progress.renew":               {pg, stack},
	"progress.reasons":             {"contract:lease_conflict reasons", pg},
	"commit.fence":                 {pg, stack},
	"commit.not-committable":       {pg, stack},
	"commit.lease-expired":         {pg, stack},
	"commit.cancel-wins":           {pg, stack},
	"commit.claim":                 {pg, stack},
	"verify.size-hash":             {pg, stack},
	"commit.cancel-during-verify":  {pg, stack},
	"commit.verification-failed":   {pg, stack},
	"commit.succeed":               {pg, stack},
	"fail.fence":                   {pg, stack},
	"fail.bad-code":                {pg, stack, "contract:reply and failure codes named"},
	"fail.requeue":                 {pg, stack},
	"fail.retryable":               {"contract:retryable failure codes"},
	"fail.final":                   {"contract:non-retryable failure codes"},
	"withdraw.fenced-to-leased":    {pg, stack},
	"withdraw.attempt-not-charged": {pg, stack},
	"cancel.queued":                {pg, stack},
	"cancel.idempotent":            {pg, stack},
	"tenancy.buyer":                {pg, stack},
	"sweep.lost":                   {pg, stack},
	"sweep.admission":              {pg, stack},
	"sweep.offline":                {pg, stack},
	"terminal.settle":              {pg, stack},
	"journal.replay":               {pg, stack},
	// Section 4: the invariants, checked after every step of every campaign.
	"inv.1": {model, pg, stack}, "inv.2": {model, pg, stack}, "inv.3": {model, pg, stack},
	"inv.4": {model, pg, stack}, "inv.5": {model, pg, stack}, "inv.6": {model, pg, stack},
	"inv.7": {model, pg, stack}, "inv.8": {pg, stack}, "inv.9": {model, pg, stack},
	// Section 5: the wire.
	"wire.read-limit":       {"contract:wire frame read limit"},
	"wire.frames":           {stack},
	"wire.commit-result":    {stack},
	"fleet.reconnect-bound": {"fleet:reconnect-bound"},
	"fleet.drain-bound":     {"fleet:drain-bound"},
	// Section 6, Replicated Postgres: the scenarios' headers name theirs;
	// the fleet campaign on the Patroni cluster kills the primary with
	// its standbys' WAL held back and checks every acknowledgement after.
	"failover.ack-after-replicated-commit": {"fleet:commit-ok-live", "fleet:accepted-terminal", "fleet:webhook-terminal",
		"fleet:journal-chain"},
	// Section 6 and its semantics on S3.
	"s3.create-only": {"scenario:late_upload_after_commit@s3", "scenario:upload_after_claim@s3"},
	// docs/semantics.md: orders of checks and effects.
	"journal.row-order":      {pg, stack},
	"create.order":           {pg, stack, "contract:CreateJob validation order"},
	"create.fingerprint":     {pg, stack},
	"lease.no-slot":          {pg, stack},
	"lease.heartbeat":        {pg, stack},
	"lease.journal":          {pg, stack, "contract:journal actors"},
	"progress.order":         {pg, stack},
	"commit.repeat":          {pg, stack},
	"commit.verify-deadline": {pg, stack},
	"commit.finish-order":    {pg, stack},
	"fail.expired-may-fail":  {pg, stack},
	"fail.order":             {pg, stack},
	"withdraw.order":         {pg, stack},
	"cancel.order":           {pg, stack},
	"sweep.order":            {pg, stack},
	"liveness.rejections":    {pg, stack},
	// The buyers' HTTP API, grants, uploaded inputs and S3: what only the
	// scenarios' runs on a bucket check (qualify's --s3-scenarios).
	"input.create-only":   {"scenario:grant_kinds@s3"},
	"s3.grants":           {"scenario:grant_kinds@s3"},
	"s3.put-prefixes":     {"scenario:grant_kinds@s3"},
	"s3.condition-signed": {"scenario:grant_kinds@s3"},
	"s3.sealed":           {"scenario:grant_kinds@s3"},
	"s3.served-key":       {"scenario:grant_kinds@s3"},
	"s3.snapshot":         {"scenario:grant_kinds@s3"},
	"s3.no-verdict":       {"scenario:grant_kinds@s3"},
	// Pausing a service (issue 51): pause and resume are events of the
	// generator, so the model and both differential campaigns compare them
	// (the three-way one through the operators' API route).
	"service.paused-not-offered":        {"campaign:model", pg, stack},
	"service.paused-admission-deadline": {"campaign:model", pg, stack},
	"service.pause-idempotent":          {"campaign:model", pg, stack},
	"service.resume-offers":             {pg, stack},
}

// The campaigns, by the names qualify gives them.
const (
	model = "campaign:model"
	pg    = "campaign:model-vs-postgres"
	stack = "campaign:model-vs-postgres-vs-stack"
)

// NotCheckable lists the rules no check of qualify can reach on the
// machines it runs on, each with why; the card prints them.
var NotCheckable = map[string]string{
	"token.constant-time": "a timing property: no outcome of a comparison depends on it, so no check of outcomes can fail it; " +
		"protocol.VerifyCommitToken and every secret lookup use crypto/subtle (read in review)",
	"agent.launchd": "macOS only: launchd runs the plist; qualify runs on Linux (the generated plist's ExitTimeOut is a unit test, " +
		"TestAgentInstallUninstallStatus)",
	"tls.acme": "needs an ACME CA: qualify starts no Pebble, and a public CA is out of reach; " +
		"harness/e2e TestACMECertificateFromPebble runs it against Pebble (installed by .ci/setup)",
}

// RuleTrace is one rule with what reaches it.
type RuleTrace struct {
	Rule
	// Checks are the checks of qualify that reach the rule.
	Checks []string
	// Mutants are the source mutants that break it.
	Mutants []string
	// NotCheckable is why no check can reach it, or "".
	NotCheckable string
}

// Trace joins the rules with the checks that reach them (Traced and the
// scenarios' rules, by scenario name) and the mutants that break them (by
// mutant id). It fails, naming each, on a rule id that the text does not
// hold (in Traced, NotCheckable, a scenario's header or a mutant's Rules):
// a dangling id is a check that checks nothing.
func Trace(rules []Rule, scenarios, mutants map[string][]string) ([]RuleTrace, error) {
	known := map[string]bool{}
	for _, r := range rules {
		known[r.ID] = true
	}
	var bad []string
	dangling := func(where string, ids []string) {
		for _, id := range ids {
			if !known[id] {
				bad = append(bad, fmt.Sprintf("%s names rule %s, which the contract does not hold", where, id))
			}
		}
	}
	checks := map[string][]string{}
	for id, cs := range Traced {
		dangling("contract.Traced", []string{id})
		checks[id] = append(checks[id], cs...)
	}
	for id := range NotCheckable {
		dangling("contract.NotCheckable", []string{id})
	}
	for _, name := range sortedKeys(scenarios) {
		dangling("scenario "+name, scenarios[name])
		for _, id := range scenarios[name] {
			checks[id] = append(checks[id], "scenario:"+name)
		}
	}
	broken := map[string][]string{}
	for _, m := range sortedKeys(mutants) {
		dangling("mutant "+m, mutants[m])
		for _, id := range mutants[m] {
			broken[id] = append(broken[id], m)
		}
	}
	out := make([]RuleTrace, 0, len(rules))
	for _, r := range rules {
		cs := checks[r.ID]
		sort.Strings(cs)
		out = append(out, RuleTrace{Rule: r, Checks: slices.Compact(cs), Mutants: broken[r.ID], NotCheckable: NotCheckable[r.ID]})
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return out, fmt.Errorf("the rule trace:\n  %s", strings.Join(slices.Compact(bad), "\n  "))
	}
	return out, nil
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
