package patroniprovider

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestClusterFailsOverRejoinsAndSwitchesOver runs the whole life the fleet
// puts a cluster through: a committed row survives the leader's SIGKILL,
// the synchronous standby is promoted, the killed node rejoins as a
// standby, and a planned switchover moves the leader again.
func TestClusterFailsOverRejoinsAndSwitchesOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := Open(ctx, Options{Log: os.Stderr})
	require.NoError(t, err)
	defer c.Close()
	t.Logf("cluster healthy after %s", time.Since(began).Round(time.Millisecond))

	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE acked (n int PRIMARY KEY)`)
	require.NoError(t, err)
	for i := range 50 {
		_, err = conn.Exec(ctx, `INSERT INTO acked VALUES ($1)`, i)
		require.NoError(t, err)
	}
	conn.Close(ctx)

	first, err := c.Leader(ctx)
	require.NoError(t, err)
	killed := time.Now()
	dead, err := c.KillLeader(ctx)
	require.NoError(t, err)
	require.Equal(t, first, dead)
	require.Equal(t, []int{dead}, c.Down())
	var second int
	require.Eventually(t, func() bool {
		second, err = c.Leader(ctx)
		return err == nil && second != dead
	}, time.Minute, 50*time.Millisecond)
	var n int
	require.Eventually(t, func() bool {
		cn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err != nil {
			return false
		}
		defer cn.Close(ctx)
		_, err = cn.Exec(ctx, `INSERT INTO acked VALUES (1000)`)
		return err == nil && cn.QueryRow(ctx, `SELECT count(*) FROM acked`).Scan(&n) == nil
	}, time.Minute, 50*time.Millisecond)
	t.Logf("pg%d killed; pg%d takes writes %s later", dead, second, time.Since(killed).Round(time.Millisecond))
	require.Equal(t, 51, n, "every acknowledged row survived the failover")

	require.NoError(t, c.StartNode(dead))
	hctx, hcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer hcancel()
	require.NoError(t, c.WaitHealthy(hctx))
	ms, err := c.Members(ctx)
	require.NoError(t, err)
	for _, m := range ms {
		if m.Name == c.Name(dead) {
			require.NotEqual(t, "leader", m.Role, "the killed node rejoined as a standby")
		}
	}

	from, to, err := c.Switchover(ctx)
	require.NoError(t, err)
	require.Equal(t, second, from)
	require.NoError(t, c.WaitHealthy(hctx))
	now, err := c.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, to, now)
}
