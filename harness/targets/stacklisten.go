package targets

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// listenerConn is a worker's connection for the frames gateway's listener
// (gateway.Config.ListenConn), kept from run to run: it was the one
// database backend started for every run, and its connect took 20-40 ms of
// a run's setup on the 2-core harness machine, mostly the backend's start.
//
// Nothing of a run reaches the next through it. release ends every
// subscription (UNLISTEN *, which also takes the backend out of the
// notification queue's listeners, as a backend that never listened) and
// drops the notifications pgx received but the listener never read; a
// connection that fails any of that is closed, and the next run gets a new
// one. The next subscribe is then, for Postgres, a first LISTEN of the
// backend, as on a new connection: it is registered at the queue's current
// position and gets only what is committed from there on. The backend
// keeps no other state of a run: the listener only runs LISTEN.
type listenerConn struct {
	url string

	mu   sync.Mutex
	conn *pgx.Conn
	lent bool
}

// lend implements gateway.Config.ListenConn.
func (l *listenerConn) lend(ctx context.Context) (*pgx.Conn, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lent {
		return nil, nil, errors.New("the worker's listener connection is already lent")
	}
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := pgx.Connect(ctx, l.url)
		if err != nil {
			return nil, nil, err
		}
		l.conn = conn
	}
	l.lent = true
	conn := l.conn
	var once sync.Once
	return conn, func() { once.Do(func() { l.release(conn) }) }, nil
}

// release takes the connection back from a finished subscription, reset,
// or closes it.
func (l *listenerConn) release(conn *pgx.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lent = false
	if err := resetListener(conn); err != nil {
		l.closeLocked()
	}
}

// resetListener ends every subscription of conn and drops the
// notifications received on it.
func resetListener(conn *pgx.Conn) error {
	if conn.IsClosed() {
		return errors.New("listener connection closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := conn.Exec(ctx, "UNLISTEN *"); err != nil {
		return fmt.Errorf("unlisten: %w", err)
	}
	// Everything the server sent before UNLISTEN's reply has been read by
	// now, and it sends no more: what is left is pgx's queue, which
	// WaitForNotification empties first. With a context already done it
	// returns nothing more without reading the connection.
	done, stop := context.WithCancel(context.Background())
	stop()
	for {
		if n, _ := conn.WaitForNotification(done); n == nil {
			return nil
		}
	}
}

// close closes the connection (the worker is done).
func (l *listenerConn) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeLocked()
}

func (l *listenerConn) closeLocked() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = l.conn.Close(ctx)
		l.conn = nil
	}
}
