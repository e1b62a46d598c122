package server_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
)

func TestCancelQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	id := b.createJob(t, t0, nil)
	r, err := b.svc.Cancel(context.Background(), t0, buyerID, id)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelled}, r)
	j := b.job(t, id)
	require.Equal(t, protocol.JobCancelled, j.Status)
	require.Equal(t, protocol.HoldReleased, j.HoldStatus)
	require.Equal(t, 1, j.Webhooks)
	require.Equal(t, protocol.BuyerRow{ID: buyerID, BalanceCents: balance}, b.buyer(t, buyerID))
	require.Equal(t, []string{"job ->queued  buyer", "job queued->cancelled  buyer"}, b.journalOf(t, id))
}

func TestCancelActiveNotifiesAndIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)

	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "LISTEN "+server.CancelChannel)
	require.NoError(t, err)

	r, err := b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, r)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(wctx)
	require.NoError(t, err)
	var notice server.CancelNotice
	require.NoError(t, json.Unmarshal([]byte(n.Payload), &notice))
	require.Equal(t, server.CancelNotice{JobID: offer.JobID, AttemptID: offer.AttemptID, DeviceID: deviceID}, notice)
	_, err = conn.Exec(ctx, "UNLISTEN *")
	require.NoError(t, err)

	require.Equal(t, protocol.AttemptLeased, b.attempt(t, offer.AttemptID).Status, "the attempt row is left as it is")
	before := b.snapshot(t)
	r, err = b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, r)
	require.Equal(t, before, b.snapshot(t), "cancelling is idempotent")
}

func TestCancelTerminal(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	id := b.createJob(t, t0, nil)
	_, err := b.svc.Cancel(ctx, t0, buyerID, id)
	require.NoError(t, err)
	r, err := b.svc.Cancel(ctx, t0, buyerID, id)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeJobTerminal}, r)

	_, c := b.uploaded(t, t0)
	r, err = b.svc.Commit(ctx, t0, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitOK, r.Code)
	r, err = b.svc.Cancel(ctx, t0, buyerID, c.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeJobTerminal}, r)
}

func TestCancelNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	id := b.createJob(t, t0, nil)
	for name, c := range map[string][2]string{
		"other buyer": {otherBuyerID, id},
		"missing job": {buyerID, missingID},
		"bad id":      {buyerID, "nope"},
	} {
		r, err := b.svc.Cancel(context.Background(), t0, c[0], c[1])
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound}, r, name)
	}
	require.Equal(t, protocol.JobQueued, b.job(t, id).Status)
}
