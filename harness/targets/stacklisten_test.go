package targets

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/fencing"
)

// TestListenerConnIsResetBetweenRuns holds listenerConn to its promise:
// the next run's listener gets the same backend, subscribed to nothing, and
// hears nothing of the previous run, not even notifications that reached
// the connection but were never read; a closed connection is replaced.
func TestListenerConnIsResetBetweenRuns(t *testing.T) {
	ctx := context.Background()
	pg := sharedPG(t)
	url, err := pg.NewDatabase(ctx)
	require.NoError(t, err)
	other, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer func() { _ = other.Close(ctx) }()
	l := &listenerConn{url: url}
	defer l.close()
	listen := sqlListen(fencing.CancelChannel)
	notify := func(payloads ...string) {
		tx, err := other.Begin(ctx)
		require.NoError(t, err)
		for _, p := range payloads {
			_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, fencing.CancelChannel, p)
			require.NoError(t, err)
		}
		require.NoError(t, tx.Commit(ctx))
	}

	conn, release, err := l.lend(ctx)
	require.NoError(t, err)
	_, _, err = l.lend(ctx)
	require.Error(t, err, "a lent connection was lent again")
	_, err = conn.Exec(ctx, listen)
	require.NoError(t, err)
	// One transaction's notifications arrive together: the listener reads
	// the first, the second is left unread on the connection.
	notify("run 1, read", "run 1, unread")
	n := waitNotification(t, conn, time.Minute)
	require.NotNil(t, n)
	require.Equal(t, "run 1, read", n.Payload)
	release()
	release() // a second release changes nothing

	conn2, release2, err := l.lend(ctx)
	require.NoError(t, err)
	require.Same(t, conn, conn2, "the worker's connection was not kept")
	var channels int
	require.NoError(t, conn2.QueryRow(ctx, `SELECT count(*) FROM pg_listening_channels()`).Scan(&channels))
	require.Zero(t, channels, "the next run's connection still listens")
	notify("between runs")
	_, err = conn2.Exec(ctx, listen)
	require.NoError(t, err)
	notify("run 2")
	n = waitNotification(t, conn2, time.Minute)
	require.NotNil(t, n)
	require.Equal(t, "run 2", n.Payload, "the next run heard the previous one")
	require.NoError(t, conn2.Close(ctx)) // the connection dies in a run
	release2()

	conn3, release3, err := l.lend(ctx)
	require.NoError(t, err)
	defer release3()
	require.NotSame(t, conn, conn3)
	require.NoError(t, conn3.Ping(ctx))
}

func sqlListen(channel string) string { return "LISTEN " + pgx.Identifier{channel}.Sanitize() }

func waitNotification(t *testing.T, conn *pgx.Conn, d time.Duration) *pgconn.Notification {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	require.NoError(t, err)
	return n
}
