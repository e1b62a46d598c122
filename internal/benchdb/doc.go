// Package benchdb is the bulk-seeded benchmark database and the pgbench run
// of server/fencing/testdata/lease.pgbench on it: queued jobs with their holds and
// journal rows, and devices whose ids the pgbench script computes. It is
// the one copy shared by the server's benchmarks (server/fencing/bench_test.go) and
// `rendermac bench`'s pgbench comparison, and imports only pgx, so the
// server's tests can use it without linking the load harness.
package benchdb
