package localserver

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

// A shared server is opened once, a failed open is remembered, Shutdown
// closes what was opened and lets the next Get open again.
func TestSharedOpensOnceAndShutdownCloses(t *testing.T) {
	var s Shared[*closer]
	opens := 0
	open := func(context.Context) (*closer, error) { opens++; return &closer{}, nil }
	a, err := s.Get(context.Background(), open)
	require.NoError(t, err)
	b, _ := s.Get(context.Background(), open)
	require.Same(t, a, b)
	require.Equal(t, 1, opens)
	require.NoError(t, s.Shutdown())
	require.Equal(t, 1, a.closed)
	c, _ := s.Get(context.Background(), open)
	require.NotSame(t, a, c)
	require.Equal(t, 2, opens)

	boom := errors.New("no server")
	restore := s.Set(nil, boom)
	_, err = s.Get(context.Background(), open)
	require.ErrorIs(t, err, boom)
	require.NoError(t, s.Shutdown(), "nothing was opened: nothing to close")
	restore()
	got, err := s.Get(context.Background(), open)
	require.NoError(t, err)
	require.Same(t, c, got, "restore puts back the server Set replaced")
}

func TestFreeAddrCanBeListenedOn(t *testing.T) {
	addr, err := FreeAddr()
	require.NoError(t, err)
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, l.Close())
}
