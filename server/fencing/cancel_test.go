package fencing_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

func TestCancelActiveNotifiesAndIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)

	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "LISTEN "+fencing.CancelChannel)
	require.NoError(t, err)

	r, err := b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, r)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(wctx)
	require.NoError(t, err)
	var notice fencing.CancelNotice
	require.NoError(t, json.Unmarshal([]byte(n.Payload), &notice))
	require.Equal(t, fencing.CancelNotice{JobID: offer.JobID, AttemptID: offer.AttemptID, DeviceID: deviceID}, notice)
	_, err = conn.Exec(ctx, "UNLISTEN *")
	require.NoError(t, err)

	require.Equal(t, protocol.AttemptLeased, b.attempt(t, offer.AttemptID).Status, "the attempt row is left as it is")
	before := b.snapshot(t)
	r, err = b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, r)
	require.Equal(t, before, b.snapshot(t), "cancelling is idempotent")
}
