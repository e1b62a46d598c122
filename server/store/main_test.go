package store_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/store"
)

// TestMain checks for leaked goroutines after all tests and stops the shared
// Postgres cluster.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := pgprovider.Shutdown(); err != nil && code == 0 {
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// templateName is the migrated template every test database is cloned from.
const templateName = "rendermac_store"

// newPool returns a pool on a fresh migrated database, closed at test end.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := pgprovider.MustDatabase(t, templateName, store.Migrate)
	pool, err := store.OpenPool(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
