package store_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/pgtest"
	"github.com/rendermac/rendermac/server/store"
)

// TestMain checks for leaked goroutines after all tests and stops the shared
// Postgres cluster.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, nil)) }

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
