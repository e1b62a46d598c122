package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLeaseOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.m.AddDevice("dev-big", []string{svcSynthetic}, 3)
	// Two jobs at the same instant and one a second later: the pick is by
	// created_at, then by id (whatever the ids' draw order).
	first := b.create(request(buyerRich, svcSynthetic))
	second := b.create(request(buyerRich, svcSynthetic))
	b.tick(time.Second)
	third := b.create(request(buyerRich, svcSynthetic))
	lo, hi := first, second
	if hi < lo {
		lo, hi = hi, lo
	}
	for _, want := range []string{lo, hi, third} {
		require.Equal(t, want, b.lease("dev-big").JobID)
	}
}
