package fencing_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// TestRefusedUploadKeepsItsStatementPrepared: an upload naming no attempt
// is refused (SealedError without a status) and is no error of the batch
// that checked it, so the seal check stays prepared on its connection. pgx
// drops every statement of a failed batch from its cache, and each such
// upload had the next one prepared and planned again.
func TestRefusedUploadKeepsItsStatementPrepared(t *testing.T) {
	ctx := context.Background()
	cfg, err := store.PoolConfig(pgprovider.MustDatabase(t, templateName, store.Migrate))
	require.NoError(t, err)
	cfg.MaxConns = 1 // one session: its prepared statements are the ones counted
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	fs, err := artifact.NewFS(t.TempDir())
	require.NoError(t, err)
	defer func() { _ = fs.Close() }()
	ids := protocol.RandomIDs{Jobs: rand.NewChaCha8([32]byte{1}), Attempts: rand.NewChaCha8([32]byte{2}), Tokens: rand.NewChaCha8([32]byte{3})}
	svc := fencing.NewService(pool, fs, ids, fencing.Config{LeaseTTL: ttl})

	const uploads = 3
	for range uploads {
		_, err := svc.PutOutput(ctx, missingID, missingID, strings.NewReader("bytes"))
		var sealed *fencing.SealedError
		require.ErrorAs(t, err, &sealed)
		require.Empty(t, sealed.Status, "an attempt that does not exist has no status")
	}
	var runs int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum(generic_plans + custom_plans), 0) FROM pg_prepared_statements
		WHERE statement LIKE '%FROM job_attempts WHERE id = $1 AND job_id = $2 FOR SHARE%'
		  AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&runs))
	require.EqualValues(t, uploads, runs, "the seal check was prepared again (a prepared statement counts only its own runs)")
}
