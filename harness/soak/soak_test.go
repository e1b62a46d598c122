package soak

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/artifact"
)

// TestShortSoak runs the soak for 20 seconds with a fault about every
// 1.5s: every check must pass, and the run must have exercised the stack.
// Then it damages what the soak left, one kind of loss at a time, and the
// checks must name each.
func TestShortSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	var log bytes.Buffer
	planted := map[string][]string{}
	cfg := Config{Duration: 20 * time.Second, Seed: 7, Agents: 4, Rate: 6,
		FaultEvery: 1500 * time.Millisecond, Drain: 90 * time.Second, Log: &log}
	cfg.afterChecks = func(ctx context.Context, s *stack) {
		// A job accepted but never stored; a webhook marked delivered that
		// the receiver never acknowledged; a buyer charged twice.
		s.accepted.Add("00000000-0000-4000-8000-00000000beef")
		got := s.hook.got
		s.hook.mu.Lock()
		for id := range got {
			delete(got, id)
			break
		}
		s.hook.mu.Unlock()
		_, err := s.obs.Exec(ctx, `UPDATE buyers SET balance_cents = balance_cents - 10
		    WHERE id = (SELECT min(id::text)::uuid FROM buyers)`)
		require.NoError(t, err)
		// A succeeded job's stored output replaced behind the rows' back.
		var key string
		require.NoError(t, s.obs.QueryRow(ctx, `SELECT output_key FROM jobs WHERE status = 'succeeded'
		    ORDER BY id LIMIT 1`).Scan(&key))
		fs, err := artifact.NewFS(s.dir)
		require.NoError(t, err)
		_, err = fs.Put(ctx, key, strings.NewReader("not the verified output"))
		require.NoError(t, err)
		require.NoError(t, fs.Close())
		var rep Report
		require.NoError(t, s.check(ctx, &rep))
		for _, c := range rep.Checks {
			planted[c.Name] = c.Violations
		}
	}
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err, log.String())
	var out bytes.Buffer
	require.NoError(t, rep.PrintTable(&out))
	t.Logf("%s\n%s", log.String(), out.String())
	require.Zero(t, rep.Violations(), out.String())
	require.Positive(t, rep.Succeeded)
	require.Positive(t, rep.Stats.Faults)
	require.Len(t, rep.Checks, 7)

	want := map[string]string{
		"every accepted job reached a terminal state":                            "00000000-0000-4000-8000-00000000beef (accepted with 201) is missing",
		"no webhook lost (delivered to the receiver or pending retry)":           "the receiver never acknowledged it",
		"every hold settled exactly once, balances add up":                       "balance",
		"SPEC invariants 1-9 (store.CheckInvariants)":                            "invariant 7",
		"succeeded outputs re-read and hashed (store.CheckOutputs, invariant 8)": "is 23 bytes sha256",
	}
	for check, frag := range want {
		require.NotEmpty(t, planted[check], "check %q missed the planted damage", check)
		require.Contains(t, strings.Join(planted[check], "\n"), frag, check)
	}
}
