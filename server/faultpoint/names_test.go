package faultpoint_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/faultpoint"
)

// The names are the contract a scenario file or RENDERMAC_FAULTPOINTS uses.
func TestNames(t *testing.T) {
	want := []string{
		"commit.before_tx1", "commit.after_tx1", "commit.during_verify", "commit.before_tx2", "commit.after_tx2",
		"fail.before_tx", "fail.after_tx", "cancel.before_tx", "cancel.after_tx", "sweep.before_tx", "sweep.after_tx",
		"gateway.before_slot_release", "gateway.after_offer_write", "create.before_insert", "lease.before_pick",
		"lease.after_pick", "gateway.before_lost_frame", "prune.before_tx", "prune.before_store_delete",
	}
	require.Equal(t, want, faultpoint.Names())
	shape := regexp.MustCompile(`^[a-z]+\.[a-z0-9_]+$`)
	for _, n := range want {
		require.True(t, faultpoint.Known(n), n)
		require.Regexp(t, shape, n)
	}
	require.False(t, faultpoint.Known("commit.before_tx3"))
	names := faultpoint.Names()
	names[0] = "mutated"
	require.Equal(t, want, faultpoint.Names(), "Names must return a copy")
}
