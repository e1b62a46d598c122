// Package patroniprovider hands out a real replicated Postgres cluster
// under a real failover manager: etcd 3.4 (with its v2 API, which Debian's
// python3-etcd speaks) and three PostgreSQL 15 nodes managed by Patroni
// 3.0, on loopback ports, in a temp dir of their own. The fleet campaign
// and its tests run the control plane on it and lose its primary on
// purpose; nothing here is a mock of what Patroni does.
//
// # Where the tools come from
//
// [Open] looks for `etcd` and `patroni` on PATH and for the PostgreSQL
// server binaries as package pgprovider does. Without them it fails with
// [ErrNoPatroni] and the command that installs them (Debian's packages
// `patroni` and `etcd-server`, which .ci/run installs); callers fail, never
// skip. As root, Patroni (and so initdb and postgres) runs as the
// unprivileged "postgres" account, since initdb refuses root.
//
// # What it can do to the cluster
//
//   - [Cluster.Leader] asks Patroni's REST API which node leads.
//   - [Cluster.KillLeader] SIGKILLs the leader's Patroni and then its
//     postmaster with every backend: the machine dies, nothing shuts down.
//     Patroni on the synchronous standby takes the leader key once its TTL
//     runs out (10 s) and promotes it.
//   - [Cluster.StartNode] restarts a killed node's Patroni; it rejoins as a
//     standby of the new leader, rewinding its diverged WAL with pg_rewind
//     (use_pg_rewind) or, failing that, cloning anew.
//   - [Cluster.Switchover] is a planned switchover through the leader's
//     REST API (what `patronictl switchover` sends), to the synchronous
//     standby.
//   - [Cluster.WaitHealthy] waits for a leader that takes writes, every
//     node running and, in synchronous mode, a synchronous standby.
//   - [Cluster.HoldBack] (Options.ReplicationProxy only) silences the
//     replication connections to a node through the project's TCP proxy,
//     so its standbys stop receiving WAL while it keeps committing: the
//     lossy failover an asynchronous cluster allows, made to happen.
//
// # Guarantees
//
//   - Synchronous by default: `synchronous_mode: true`, so a commit the
//     primary acknowledged is on the synchronous standby, and Patroni
//     promotes only that standby (Options.Asynchronous turns it off, and
//     lets a standby of any lag be promoted: the broken configuration).
//   - No orphans: etcd and Patroni get a parent-death signal on Linux;
//     [Cluster.Close] kills every process and removes the directory, and
//     [Open] first removes the directories (and kills the postmasters) of
//     clusters whose owning process died.
package patroniprovider
