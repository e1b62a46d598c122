package store_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/tcpproxy"
	"github.com/rendermac/rendermac/server/store"
)

// TestPoolDropsConnectionThatAnsweredReadOnly: a connection whose server
// refused a write as read-only (as a standby does) is closed on release;
// the next acquire is a fresh connection, which takes the write.
func TestPoolDropsConnectionThatAnsweredReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgprovider.MustDatabase(t, templateName, store.Migrate)
	cfg, err := store.PoolConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := store.OpenPoolConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()

	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `SET default_transaction_read_only = on`)
	require.NoError(t, err)
	stale := c.Conn().PgConn().PID()
	c.Release()

	_, err = pool.Exec(ctx, `INSERT INTO buyers (id, name, balance_cents, initial_cents) VALUES ($1, 'b', 1, 1)`, buyerID)
	require.True(t, store.ReadOnly(err), "the stale connection refuses the write: %v", err)

	var pid uint32
	require.NoError(t, pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		pid = c.Conn().PgConn().PID()
		_, err := c.Exec(ctx, `INSERT INTO buyers (id, name, balance_cents, initial_cents) VALUES ($1, 'b', 1, 1)`, buyerID)
		return err
	}))
	require.NotEqual(t, stale, pid, "the connection that answered read-only was handed out again")
}

// TestAwaitNotificationLeavesASilentDeadConnection: a LISTEN connection
// whose server vanished without closing it (its packets black-holed, as
// a host that died does) is noticed by the liveness question, not waited
// on forever; a live one gets its notification.
func TestAwaitNotificationLeavesASilentDeadConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgprovider.MustDatabase(t, templateName, store.Migrate)
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	proxy, err := tcpproxy.New(net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	require.NoError(t, err)
	defer proxy.Close()
	_, port, err := net.SplitHostPort(proxy.Addr())
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	pcfg := cfg.Copy()
	pcfg.Host, pcfg.Port = "127.0.0.1", uint16(p)
	listener, err := pgx.ConnectConfig(ctx, pcfg)
	require.NoError(t, err)
	defer listener.Close(context.Background())
	_, err = listener.Exec(ctx, `LISTEN rendermac_test`)
	require.NoError(t, err)

	sender, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer sender.Close(ctx)
	_, err = sender.Exec(ctx, `NOTIFY rendermac_test, 'hello'`)
	require.NoError(t, err)
	n, err := store.AwaitNotification(ctx, listener)
	require.NoError(t, err)
	require.Equal(t, "hello", n.Payload)

	proxy.BlackHole()
	began := time.Now()
	_, err = store.AwaitNotification(ctx, listener)
	require.Error(t, err)
	require.Less(t, time.Since(began), store.ListenCheck+10*time.Second, "noticed within the check and its probe's bound")
}
