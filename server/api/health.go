package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rendermac/rendermac/protocol/buyer"
)

// readyTimeout bounds /readyz, so a hung database makes the probe fail
// rather than hang the prober.
const readyTimeout = 2 * time.Second

// sqlSchemaVersion reads goose's bookkeeping. The Provider API that
// store.Migrate uses deletes a version's row on down, so the newest applied
// row is the schema's version.
const sqlSchemaVersion = `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`

// healthz is GET /healthz: the process is up and serving. It checks
// nothing else, so that a database outage does not get the process
// restarted (that is what /readyz is for).
func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is GET /readyz: 200 when the database answers and its schema is
// at least SchemaVersion, else 503 not_ready with the reason.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if reason, err := a.ready(ctx); reason != "" {
		// The cause may name hosts and roles: the log gets it, the prober not.
		a.log.WarnContext(r.Context(), "not ready", "reason", reason, "err", err)
		writeError(w, http.StatusServiceUnavailable, buyer.CodeNotReady, reason)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ready returns "" when ready, else a reason fit for the prober and the
// underlying error for the log.
func (a *API) ready(ctx context.Context) (reason string, err error) {
	if err := a.pool.Ping(ctx); err != nil {
		return "database unreachable", err
	}
	var version int64
	if err := a.pool.QueryRow(ctx, sqlSchemaVersion).Scan(&version); err != nil {
		return "schema version unreadable (migrations not run?)", err
	}
	if version < SchemaVersion {
		return fmt.Sprintf("schema at version %d, need %d: run rendermac migrate", version, SchemaVersion), nil
	}
	return "", nil
}
