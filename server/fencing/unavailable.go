package fencing

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rendermac/rendermac/server/store"
)

// Unavailable reports whether err says the database cannot decide now but
// will once a primary takes writes again: no host took a connection (a
// failover in progress, Postgres restarting), the server refused a write
// as read-only (SQLSTATE 25006: a standby or a demoted primary), or it is
// shutting down, starting or crashed (57P01, 57P02, 57P03, class 08).
// A connection that dies under an operation is not this by itself: a cut
// is retried a few times on fresh connections, and only if no fresh
// connection can be had does the operation wait (docs/SPEC.md,
// "Replicated Postgres").
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if store.ReadOnly(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	}
	return false
}
