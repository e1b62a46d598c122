package fencing_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/fencing"
)

// TestUnavailableClassifiesFailoverErrors: what a failover shows a client
// (no host takes a connection, read-only, shutting down, crashed, a
// connection exception) is Unavailable, wrapped or not; a serialization
// failure, a constraint, a cut connection and nil are not.
func TestUnavailableClassifiesFailoverErrors(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("lock job: %w", &pgconn.PgError{Code: code}) }
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no host took a connection", fmt.Errorf("commit_begin: %w", &pgconn.ConnectError{}), true},
		{"read only", pg("25006"), true},
		{"admin shutdown", pg("57P01"), true},
		{"crash shutdown", pg("57P02"), true},
		{"cannot connect now", pg("57P03"), true},
		{"connection failure", pg("08006"), true},
		{"serialization failure", pg("40001"), false},
		{"unique violation", pg("23505"), false},
		{"cut connection", fmt.Errorf("commit_begin: %w", io.ErrUnexpectedEOF), false},
		{"internal", fencing.ErrInternal, false},
		{"nil", nil, false},
		{"plain", errors.New("boom"), false},
	} {
		require.Equal(t, c.want, fencing.Unavailable(c.err), c.name)
	}
}
