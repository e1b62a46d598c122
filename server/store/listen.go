package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ListenCheck is how long a LISTENing connection may stay silent before
// AwaitNotification asks its server whether it is still a primary.
const ListenCheck = 5 * time.Second

// listenProbeTimeout bounds that question.
const listenProbeTimeout = 3 * time.Second

// ErrStandby is AwaitNotification's error when the server it LISTENs on
// has become a standby: notifications are only sent on the primary, so
// the subscription must be made again on the new one.
var ErrStandby = errors.New("the LISTEN connection's server is in recovery (a standby)")

// AwaitNotification waits for conn's next notification. Every ListenCheck
// of silence it asks the server `SELECT pg_is_in_recovery()`: a connection
// whose server died without closing it (a host gone after a failover: no
// FIN, no RST) fails the question within listenProbeTimeout, and one on a
// server that became a standby answers true (ErrStandby); either way the
// caller reconnects and subscribes on whichever host takes writes now,
// rather than waiting forever for notifications that go elsewhere.
func AwaitNotification(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, ListenCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil {
			return n, nil
		}
		if ctx.Err() != nil || !errors.Is(wctx.Err(), context.DeadlineExceeded) || conn.IsClosed() {
			return nil, err
		}
		pctx, pcancel := context.WithTimeout(ctx, listenProbeTimeout)
		var standby bool
		err = conn.QueryRow(pctx, "SELECT pg_is_in_recovery()").Scan(&standby)
		pcancel()
		switch {
		case err != nil:
			return nil, err
		case standby:
			return nil, ErrStandby
		}
	}
}
