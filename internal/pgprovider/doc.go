// Package pgprovider hands out real PostgreSQL servers and databases to
// tests, the fault harness and the CLI.
//
// # Where the server comes from
//
// [Open] tries, in order, and uses the first that works:
//
//  1. Options.URL, else the DATABASE_URL environment variable ("env").
//     The server is used as-is; it is never started, stopped or
//     reconfigured. The role must have CREATEDB (PostgreSQL 13 or newer),
//     because templates and per-test databases are created on that server.
//     To keep concurrent test processes sharing one server apart, template
//     names get a per-process suffix there, and Close drops every database
//     this Provider created.
//  2. An ephemeral cluster from local PostgreSQL server binaries ("local"),
//     found on PATH or in /usr/lib/postgresql/*/bin (15 preferred). It is
//     initdb'ed into a fresh temp dir, listens on 127.0.0.1:<free port> and
//     on a unix socket in its data directory, trusts every local
//     connection, and is removed by Close. As root, initdb and postgres run
//     as the unprivileged "postgres" user because they refuse to run as
//     root.
//  3. A postgres:15 container via testcontainers-go ("docker"), if a Docker
//     engine answers a health check within a few seconds. Only in a
//     -tags docker build (make test, make qualify): the shipped binary
//     does not link testcontainers.
//
// If none is available Open fails with [ErrNoPostgres] and a message that
// says how to provide one. Tests using [MustDatabase] then fail; they never
// skip, because a silently skipped database test is a test that lies.
//
// # Guarantees
//
//   - Isolation: [Provider.NewDatabase] clones a migrated template with
//     CREATE DATABASE ... TEMPLATE, so every caller gets its own database
//     in milliseconds without re-running migrations.
//   - Stable addresses (local only): [Provider.Stop], [Provider.Crash] and
//     [Provider.Start] reuse the same data directory and the same port, so
//     every URL handed out before a fault still works after restart, and
//     committed data survives a Crash (durability against process crashes
//     is kept even with fsync=off; only an OS crash could lose data).
//   - No orphans: the postmaster is started with a parent-death signal on
//     Linux, so it dies with the Go process; temp dirs left behind by dead
//     processes are removed by the next local Open.
//   - env and docker servers are not fault-controllable: Stop, Crash and
//     Start return [ErrNotControllable] there.
//
// Settings of the ephemeral cluster favour speed over OS-crash safety:
// fsync=off (see Options.Fsync), max_connections=200, shared_buffers=32MB,
// and on Linux the data dir goes to /dev/shm when that is a roomy tmpfs
// (clones are ~20x faster than on a busy disk; TMPDIR or Options.BaseDir
// override it). Crash kills the backends too on Linux; elsewhere they exit
// when they notice the dead postmaster, and Start waits for that.
package pgprovider
