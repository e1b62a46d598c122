package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The statement mix is read from pg_stat_statements, which the bench's
// own cluster preloads (PgSettings). It counts every statement any
// session ran in a database, so a mix is the difference of two snapshots
// of one database taken around the work it describes.

// PgSettings are the server settings the bench's embedded cluster starts
// with: pg_stat_statements preloaded, counting top-level statements
// (pipelined ones included) and BEGIN/COMMIT.
var PgSettings = []string{"shared_preload_libraries=pg_stat_statements",
	"pg_stat_statements.track=top", "pg_stat_statements.track_utility=on", "pg_stat_statements.max=5000"}

// StatementMix is one database's statements over a window, per job.
type StatementMix struct {
	// Jobs is the jobs the window finished, the divisor of every per-job
	// figure.
	Jobs int `json:"jobs"`
	// PerJob is statements (round trips of one statement each, or
	// members of a pipeline) per job, BEGIN, COMMIT and ROLLBACK aside:
	// pg_stat_statements counts those only in part when they come over
	// the extended protocol (the server's pgx and pgbench -M prepared), so
	// transactions are counted by the server's pool tracer instead
	// (DBResult).
	PerJob float64 `json:"statements_per_job"`
	// TxControlPerJob is the BEGIN, COMMIT and ROLLBACK it did count.
	TxControlPerJob float64 `json:"tx_control_counted_per_job"`
	// RowsPerJob is rows returned or affected per job.
	RowsPerJob float64 `json:"rows_per_job"`
	// ExecMSPerJob is the statements' execution time per job as
	// pg_stat_statements times it (not planning, not the protocol).
	ExecMSPerJob float64           `json:"exec_ms_per_job"`
	Statements   []StatementPerJob `json:"statements"`
	Error        string            `json:"error,omitempty"`
}

// StatementPerJob is one normalised statement's share of a job.
type StatementPerJob struct {
	Query       string  `json:"query"`
	CallsPerJob float64 `json:"calls_per_job"`
	RowsPerJob  float64 `json:"rows_per_job"`
	MeanMS      float64 `json:"mean_exec_ms"`
}

// stmtCounts is one snapshot: per queryid its text, calls, rows and
// execution time.
type stmtCounts map[int64]stmtCount

type stmtCount struct {
	query  string
	calls  int64
	rows   int64
	execMS float64
}

// stmtReader snapshots pg_stat_statements for one database through the
// admin database, where the extension is created.
type stmtReader struct {
	admin string // admin URL
	db    string // the database's name
}

// newStmtReader creates the extension in the admin database (its view
// shows every database's statements) and returns a reader for dbURL's
// database ("": every database but the admin one), or an error when the
// server does not preload the library.
func newStmtReader(ctx context.Context, adminURL, dbURL string) (*stmtReader, error) {
	name := ""
	if dbURL != "" {
		cc, err := pgx.ParseConfig(dbURL)
		if err != nil {
			return nil, err
		}
		name = cc.Database
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	return &stmtReader{admin: adminURL, db: name}, nil
}

const sqlStatements = `
SELECT queryid, query, calls, rows, total_exec_time FROM pg_stat_statements
WHERE (dbid = (SELECT oid FROM pg_database WHERE datname = $1)
       OR ($1 = '' AND dbid <> (SELECT oid FROM pg_database WHERE datname = current_database())))
  AND query NOT LIKE '%pg_stat_statements%'`

func (r *stmtReader) snapshot(ctx context.Context) (stmtCounts, error) {
	conn, err := pgx.Connect(ctx, r.admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sqlStatements, r.db)
	if err != nil {
		return nil, err
	}
	out := stmtCounts{}
	for rows.Next() {
		var id int64
		var c stmtCount
		if err := rows.Scan(&id, &c.query, &c.calls, &c.rows, &c.execMS); err != nil {
			return nil, err
		}
		// Databases cloned from one template share relation OIDs, so one
		// statement has one queryid in each; a window over several
		// databases (the campaigns') sums them.
		sum := out[id]
		sum.query = c.query
		sum.calls += c.calls
		sum.rows += c.rows
		sum.execMS += c.execMS
		out[id] = sum
	}
	return out, rows.Err()
}

// slowestStatement is the reader's database's statement with the highest
// mean execution time (the view lives in the admin database).
func (r *stmtReader) slowestStatement(ctx context.Context) (query string, meanMS float64, err error) {
	conn, err := pgx.Connect(ctx, r.admin)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, sqlSlowest, r.db).Scan(&query, &meanMS)
	return query, meanMS, err
}

// sqlSlowest is the statement of database $1 ("": the connection's own)
// with the highest mean execution time, the lookup itself aside.
const sqlSlowest = `SELECT query, mean_exec_time FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = coalesce(nullif($1, ''), current_database()))
  AND query NOT LIKE '%pg_stat_statements%'
ORDER BY mean_exec_time DESC LIMIT 1`

// mix is after minus before over jobs, the statements sorted by calls
// per job (then text). Statements below minCallsPerJob are left out of
// the list (not of the totals): the bench's own reads, sweeps that found
// nothing.
func mix(before, after stmtCounts, jobs int) StatementMix {
	m := StatementMix{Jobs: jobs}
	if jobs <= 0 {
		m.Error = "no jobs finished"
		return m
	}
	n := float64(jobs)
	for id, a := range after {
		b := before[id]
		calls, rows, exec := a.calls-b.calls, a.rows-b.rows, a.execMS-b.execMS
		if calls <= 0 {
			continue
		}
		if txControl(a.query) {
			m.TxControlPerJob += float64(calls) / n
			continue
		}
		m.PerJob += float64(calls) / n
		m.RowsPerJob += float64(rows) / n
		m.ExecMSPerJob += exec / n
		if float64(calls)/n < minCallsPerJob {
			continue
		}
		m.Statements = append(m.Statements, StatementPerJob{Query: oneLine(a.query), CallsPerJob: float64(calls) / n,
			RowsPerJob: float64(rows) / n, MeanMS: exec / float64(calls)})
	}
	sort.Slice(m.Statements, func(i, j int) bool {
		a, b := m.Statements[i], m.Statements[j]
		if a.CallsPerJob != b.CallsPerJob {
			return a.CallsPerJob > b.CallsPerJob
		}
		return a.Query < b.Query
	})
	return m
}

// minCallsPerJob is the smallest share of a job a statement of the mix
// table has.
const minCallsPerJob = 0.05

// txControl is whether q is BEGIN, COMMIT or ROLLBACK.
func txControl(q string) bool {
	f := strings.Fields(strings.ToLower(q))
	return len(f) > 0 && (f[0] == "begin" || f[0] == "commit" || f[0] == "rollback")
}

// oneLine folds a statement's whitespace so that a table row holds it.
func oneLine(q string) string { return strings.Join(strings.Fields(q), " ") }
