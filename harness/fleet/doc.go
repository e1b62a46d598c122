// Package fleet is `rendermac fleet`: the shipped binaries under the faults a
// fleet of Macs goes through. It starts an embedded Postgres
// (internal/pgprovider), several `rendermac server` processes sharing it and
// one artifact store (a bucket of a real S3 server, versitygw through
// internal/s3provider, when it is installed or Config.Store says s3; else
// one directory), and N `rendermac agent` processes, each paired
// through the real pairing path (a code minted as `rendermac admin
// pair-code` does, redeemed by the agent's --pair), each with its own work
// directory (a size-limited tmpfs where mounting works) and its own TCP path
// to every gateway (internal/tcpproxy). Seeded buyers (client.Client) submit
// a mix of synthetic and, where ffmpeg runs, FFmpeg jobs; some are cancelled
// while they run. Seeded faults, one at a time: Mac sleep (SIGSTOP past the
// lease TTL, then SIGCONT), Wi-Fi loss (the agent's paths black-holed, then
// healed), disk exhaustion (the work dir filled), gateway SIGKILL and
// restart, Postgres crash and restart, and an object-store outage (the
// versitygw process stopped, then restarted on the same port and data: the
// agents' presigned uploads and the gateways' verifications meet refused
// connections meanwhile).
//
// After the load and a drain, the soak's checks (soak.RunChecks) run over
// the rows, plus the fleet's own over the journal and the agents' JSON logs:
// no commit_ok for an attempt the journal says was lost or cancelled, no
// commit sent after a lease_conflict ended the attempt, no commit refused
// as commit_conflict (an agent sends only its own token), no attempt failed
// with a code that is not retryable (the mix has no bad job), no failed job
// whose attempts one device spent refusing them no_capacity, every Wi-Fi
// loss followed by a reconnect within a stated bound, and the queue drained
// within a stated bound after the last fault healed. It reports the wasted
// work per agent: seconds an agent kept working on an attempt after the
// journal says its lease was lost.
package fleet
