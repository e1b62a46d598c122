package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// sweep runs a sweep and checks the invariants after it.
func (b *testBundle) sweep() protocol.SweepResult {
	b.t.Helper()
	r := b.m.Sweep(b.now)
	b.clean()
	return r
}

func TestSweepOrderAndSteps(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.m.AddDevice("dev-big", []string{svcSynthetic}, 2)
	first := b.create(request(buyerRich, svcSynthetic))
	b.tick(time.Millisecond)
	second := b.create(request(buyerRich, svcSynthetic))
	b.lease("dev-big")
	b.lease("dev-big")
	b.tick(time.Minute)
	n := b.journalLen()
	require.Equal(t, protocol.SweepResult{Lost: 2, Requeued: 2}, b.sweep())
	rows := b.journalSince(n)
	require.Len(t, rows, 4)
	require.Equal(t, []string{first, first, second, second}, []string{rows[0].JobID, rows[1].JobID, rows[2].JobID,
		rows[3].JobID})
}
