package scenarios

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/targets"
)

// testPG is the Postgres every test here shares, opened by whichever test
// needs it first; TestMain closes it.
var testPG *targets.Postgres

func TestMain(m *testing.M) {
	code := m.Run()
	if testPG != nil {
		_ = testPG.Close()
	}
	os.Exit(code)
}

// scenarioEnv returns an Env on the package's shared Postgres.
func scenarioEnv(t *testing.T, opts EnvOptions) *Env {
	t.Helper()
	ctx := context.Background()
	if testPG == nil {
		pg, err := targets.OpenPostgres(ctx, "", io.Discard)
		require.NoError(t, err, "the scenario catalogue needs Postgres")
		testPG = pg
	}
	env, err := NewEnv(ctx, testPG, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.Close()) })
	return env
}

// The catalogue SPEC section 7 and the brief ask for, by scenario name.
var requiredScenarios = []string{
	"happy_path", "cancel_queued", "cancel_before_commit", "cancel_during_verification", "forged_device_progress",
	"wrong_epoch", "wrong_token", "replayed_commit", "expiry_requeue", "retry_budget_exhausted",
	"non_retryable_failure", "verification_failure", "admission_deadline", "agent_reconnect", "agent_restart",
	"gateway_kill_between_commits", "postgres_restart", "db_cut_during_commit", "cancel_via_other_gateway",
	"slot_release_order", "artifact_store_outage", "clock_jump", "cancel_commit_race", "postgres_crash",
	// The shipped agent's rules on the wire (issue 33).
	"agent_retry_same_process", "agent_attempt_gone_while_running", "agent_cut_before_commit",
	"agent_cancel_while_rendering", "agent_reconnect_after_expiry",
	// The stops that burn a budget (issue 48).
	"offline_fail_keeps_slot", "offer_withdrawn_when_undelivered", "close_withdraws_unanswered_offers",
	"withdraw_refused_after_progress", "agent_second_signal_keeps_budget",
}

// Every script parses, names its fault, phase and outcome, carries a
// reached mark, and is either paired with a broken variant or names the
// variant that would break it.
func TestCatalogueIsWellFormed(t *testing.T) {
	list := Catalogue()
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
		require.NotEmpty(t, s.steps, s.Name)
		require.True(t, len(s.BrokenBy) > 0 || s.Proposed != "", s.Name)
		for _, v := range s.BrokenBy {
			require.True(t, DescribeVariant(v) != "" || !variantsBuilt, "%s: %s", s.Name, v)
		}
	}
	for _, want := range requiredScenarios {
		require.Contains(t, names, want)
	}
	sel, err := Select("cancel_q*,happy_path,cancel_queued")
	require.NoError(t, err)
	require.Equal(t, []string{"cancel_queued", "happy_path"}, []string{sel[0].Name, sel[1].Name})
	require.Len(t, sel, 2)
	_, err = Select("no_such_scenario")
	require.Error(t, err)
}

// A script without a reached mark, or without a way to fail, is refused.
func TestCatalogueRefusesScriptsThatCannotFail(t *testing.T) {
	base := "name: x\nfault: f\nphase: p\nexpect: e\n"
	_, err := parseScenario("testdata/scenarios/99_x.txt", base+"broken-by: no_token_check\ncreate j1\n")
	require.ErrorContains(t, err, "no `reached` step")
	_, err = parseScenario("testdata/scenarios/99_x.txt", base+"create j1\nreached counter c\n")
	require.ErrorContains(t, err, "neither broken-by nor proposed")
	_, err = parseScenario("testdata/scenarios/99_x.txt", base+"broken-by: nope\ncreate j1\nreached counter c\n")
	require.ErrorContains(t, err, "unknown variant")
	_, err = parseScenario("testdata/scenarios/99_x.txt", base+"broken-by: no_token_check\nlaunch j1\nreached counter c\n")
	require.ErrorContains(t, err, `unknown command "launch"`)
	s, err := parseScenario("testdata/scenarios/99_x.txt", base+"broken-by: no_token_check\narm commit.during_verify block\nreached counter c\n")
	require.NoError(t, err)
	require.Contains(t, s.Needs, NeedFaultpoints)
}

// skipUnlessRunnable skips a scenario this build cannot run (fault points
// compiled out) — but fails under CI, which must build with -tags
// faultpoints, so no scenario goes silently unrun there.
func skipUnlessRunnable(t *testing.T, s Scenario) {
	t.Helper()
	if err := s.Runnable(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: CI must build with -tags faultpoints", err)
		}
		t.Skipf("%v (run with -tags faultpoints)", err)
	}
}

// skipUnlessBuilt skips a broken variant this build lacks (no -tags
// mutations), failing under CI, which must build with it.
func skipUnlessBuilt(t *testing.T, variant string) {
	t.Helper()
	if !KnownVariant(variant) && !variantsBuilt {
		if os.Getenv("CI") == "true" {
			t.Fatalf("variant %s: CI must build with -tags mutations", variant)
		}
		t.Skipf("variant %s needs a build with -tags mutations", variant)
	}
}

// TestCatalogue runs every scenario against the correct stack: each must
// pass, reach its branch and leave SPEC section 4 intact.
func TestCatalogue(t *testing.T) {
	env := scenarioEnv(t, EnvOptions{})
	start := time.Now()
	for _, s := range Catalogue() {
		t.Run(s.Name, func(t *testing.T) {
			skipUnlessRunnable(t, s)
			res := RunScenario(context.Background(), env, s)
			t.Logf("%s in %s: %s", s.Name, res.Duration.Round(time.Millisecond), res.Observed)
			if !res.Passed {
				t.Errorf("scenario failed: %v\n%s", res.Err, renderTimeline(res))
			}
			require.True(t, res.Reached, "the scenario did not reach the branch it exists for")
		})
	}
	t.Logf("catalogue: %s", time.Since(start).Round(time.Millisecond))
}

// TestScenarioBrokenVariants proves each scenario can fail: run against
// every broken variant it names, it must not pass.
func TestScenarioBrokenVariants(t *testing.T) {
	start := time.Now()
	for _, s := range Catalogue() {
		for _, v := range s.BrokenBy {
			t.Run(s.Name+"/"+v, func(t *testing.T) {
				skipUnlessRunnable(t, s)
				skipUnlessBuilt(t, v)
				opts, err := VariantOptions(v)
				require.NoError(t, err)
				env := scenarioEnv(t, opts)
				res := RunScenario(context.Background(), env, s)
				require.False(t, res.Passed, "%s passed against %s: %s\n%s", s.Name, v, res.Observed, renderTimeline(res))
				require.Error(t, res.Err)
				// It must fail at a step, not for want of a stack to run on.
				require.NotContains(t, res.Err.Error(), "setup:")
				t.Logf("%s fails against %s as it must: %v", s.Name, v, firstLine(res.Err))
			})
		}
	}
	var pending []string
	for _, s := range Catalogue() {
		if len(s.BrokenBy) == 0 {
			pending = append(pending, s.Name+": "+s.Proposed)
		}
	}
	slices.Sort(pending)
	t.Logf("not yet shown failing (need the proposed variant):\n  %s", strings.Join(pending, "\n  "))
	t.Logf("broken variants: %s", time.Since(start).Round(time.Millisecond))
}

// A mark that does not hold fails the scenario, however well its steps went.
func TestScenarioUnreachedMarkFails(t *testing.T) {
	env := scenarioEnv(t, EnvOptions{})
	s, err := parseScenario("testdata/scenarios/99_unreached.txt", `name: unreached
fault: none
phase: queued
expect: a mark that cannot hold
proposed: none
create j1
job j1 queued attempts=none
reached journal j1 job queued->succeeded
`)
	require.NoError(t, err)
	res := RunScenario(context.Background(), env, s)
	require.False(t, res.Passed)
	require.False(t, res.Reached)
	require.ErrorContains(t, res.Err, "not reached")
}

func renderTimeline(res Result) string {
	var b strings.Builder
	for _, e := range res.Timeline {
		fmt.Fprintf(&b, "  %3d %-8s %s\n", e.Step, e.Lane, e.Label)
	}
	return b.String()
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
