package fencing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

// The claims a verification refuses are the conformance suite's
// CommitVerificationFailed; these are what only a real store can show: the
// object the claim names is missing or not a valid MP4.
func TestCommitVerificationFailedOnStoredBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	cases := map[string]func(*bundle, protocol.Reply, *protocol.Commit){
		"missing object": func(b *bundle, o protocol.Reply, _ *protocol.Commit) {
			require.NoError(t, b.store.Delete(ctx, protocol.OutputKey(o.JobID, o.AttemptID)))
		},
		"invalid mp4": func(b *bundle, o protocol.Reply, c *protocol.Commit) {
			c.Output = b.put(t, o, []byte("this is not an iso-bmff file at all"))
		},
		"truncated mp4": func(b *bundle, o protocol.Reply, c *protocol.Commit) {
			c.Output = b.put(t, o, mp4.Synthetic(mp4.SyntheticParams{})[:40])
		},
	}
	for name, breakIt := range cases {
		offer, c := b.uploaded(t, t0)
		breakIt(b, offer, &c)
		r, err := b.svc.Commit(ctx, t0, deviceID, c)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeVerificationFailed, r.Code, name)
		require.NotEmpty(t, r.Message, "%s: the reply says why", name)
		j := b.job(t, offer.JobID)
		require.Equal(t, protocol.JobFailed, j.Status, "%s: not retried although attempts remain", name)
		require.Equal(t, protocol.FailVerificationFailed, j.FailureCode, name)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus, name)
		a := b.attempt(t, offer.AttemptID)
		require.Equal(t, protocol.AttemptFailed, a.Status, name)
		require.Equal(t, protocol.FailVerificationFailed, a.FailureCode, name)
	}
	require.Equal(t, protocol.BuyerRow{ID: buyerID, BalanceCents: balance}, b.buyer(t, buyerID))
}
