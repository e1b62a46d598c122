package mutate

func init() { Catalogue = append(Catalogue, failoverMutants...) }

// failoverMutants break what keeps the control plane whole across a
// Postgres failover (docs/SPEC.md, "Replicated Postgres"). qualify kills
// the first two with the scenario commit_on_read_only_primary and the
// third with its fleet campaign on the Patroni cluster, whose primary
// kill holds the standbys' WAL back until a job's success is written on
// the primary, then kills it.
var failoverMutants = []Mutant{
	{ID: "pool-keeps-read-only-conn", Kind: "failover", File: "server/store/pool.go",
		Old:   "return conn.PgConn().CustomData()[readOnlyMark] == nil",
		New:   "return true",
		What:  "the pool keeps a connection that answered read-only: every re-run of a write lands on the same standby",
		Rules: []string{"failover.read-only-connection-dropped"}},
	{ID: "final-frame-no-failover-wait", Kind: "failover", File: "server/gateway/frames.go",
		Old:   "waiting := fencing.Unavailable(err) && time.Since(began) < failoverWait",
		New:   "waiting := false",
		What:  "a commit or fail that meets an unavailable database gets its few quick retries, then the session is closed 1011",
		Rules: []string{"failover.final-frame-waits"}},
	{ID: "commit-acked-before-standby", Kind: "failover", File: "server/store/pool.go",
		Old:   "func QueueCommit(b *pgx.Batch) {\n",
		New:   "func QueueCommit(b *pgx.Batch) {\n\tb.Queue(\"SET LOCAL synchronous_commit = local\")\n",
		What:  "every pipelined transaction commits with synchronous_commit = local: acknowledged before the synchronous standby has it",
		Rules: []string{"failover.ack-after-replicated-commit"}},
}
