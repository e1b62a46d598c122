package gateway

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

const operatorID = "00000000-0000-4000-8000-0000000000e1"

// drain is an operator's drain of device1 through the service layer.
func (b *bundle) drain(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO operators (id, name, token_hash) VALUES ($1, 'test operator', repeat('e', 64))
		ON CONFLICT DO NOTHING`, operatorID)
	require.NoError(t, err)
	require.NoError(t, b.svc.DrainDevice(ctx, b.now(), operatorID, device1))
}

// drainPending reports whether device1's drain request is still recorded.
func (b *bundle) drainPending(t *testing.T) bool {
	t.Helper()
	var pending bool
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT drain_requested_at IS NOT NULL FROM devices WHERE id = $1`, device1).Scan(&pending))
	return pending
}

// A drain executed through gateway A reaches the device on gateway B (its
// NOTIFY), which then offers the device nothing though it has a free
// slot; the running attempt still commits, and the delivered drain is
// cleared.
func TestDrainCrossesGatewaysAndStopsOffers(t *testing.T) {
	t.Parallel()
	a := setup(t, Config{})
	b := a.peer(t, Config{})
	a.createJob(t, false)
	c := b.connect(t, token1, 2, 2)
	o := deviceclient.Expect[protocol.LeaseOffer](t, c)
	require.Empty(t, a.gw.sessionsOf(device1), "the device is not on gateway A")
	a.drain(t)
	require.Equal(t, &protocol.Drain{Type: protocol.TypeDrain}, deviceclient.Expect[protocol.Drain](t, c))
	require.Eventually(t, func() bool { return !a.drainPending(t) }, deviceclient.Timeout, tick, "the delivered drain is cleared")
	a.createJob(t, true)
	deviceclient.ExpectNone(t, c, 300*tick, "an offer to a drained device")
	uploading(t, c, o)
	deviceclient.MustSend(t, c, deviceclient.Commit(o, b.putOutput(t, o)))
	deviceclient.Expect[protocol.CommitOK](t, c)
	deviceclient.ExpectNone(t, c, 100*tick, "an offer into the slot the commit freed")
}

// A device drained while away is sent drain right after its next
// welcome, and offered nothing on that session.
func TestPendingDrainIsSentAfterHello(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.drain(t)
	require.True(t, b.drainPending(t))
	b.createJob(t, true)
	c := b.connect(t, token1, 1, 1)
	deviceclient.Expect[protocol.Drain](t, c)
	deviceclient.ExpectNone(t, c, 300*tick, "an offer to a drained device")
	require.False(t, b.drainPending(t))
}
