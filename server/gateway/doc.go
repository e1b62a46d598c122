// Package gateway is the device WebSocket endpoint of SPEC section 5
// (GET /v1/provider/ws) on coder/websocket, in front of the fenced service
// layer (package server).
//
// # Sessions
//
// A device authenticates with "Authorization: Bearer <device token>" before
// the upgrade; the token is looked up by its SHA-256 hash and never logged.
// The first frame must be hello; the gateway records the device's services
// and slots_total from it (slots_total never below the device's live
// attempts, so invariant 9 holds) and answers welcome. Frames are decoded
// strictly (protocol.DecodeAgentFrame); one that does not decode is answered
// with bad_message and changes nothing, and after Config.MaxBadMessages of
// them the session is closed with 1008. A frame over 64 KiB closes it with
// 1009. A frame heartbeats the device only when it is accepted: hello,
// slots and pongs to the gateway's pings here, progress, commit and fail in
// the service layer's deciding transaction; a frame answered with a
// rejection (bad_message, lease_conflict, a refused commit or fail)
// heartbeats nothing (docs/semantics.md, "Liveness").
//
// # Authority
//
// progress, commit and fail go to the service layer with the session's
// authenticated device id, never one from a frame; the service layer fences
// them by device, job, attempt, epoch and token. So a reconnecting agent
// simply goes on with the attempts it holds on a new session, and nothing,
// least of all a token, is ever re-sent. A new session of a device
// supersedes its older ones (closed 1001 after their in-flight frames).
//
// # Slots and wire order
//
// Each session tracks the device's free slots (hello and slots reports,
// minus offers, plus attempts ended by a result) and leases only into a
// free one; the service layer's count of live attempts against slots_total
// is the hard bound. A commit or fail runs in a worker, after any earlier
// frame about the same attempt, so the replies about one attempt leave in
// the order its frames came (duplicated or stale frames are answered as the
// model answers them); its result is
// written to the socket first, and only then is the slot it freed released
// and offered again. Since the service call has returned by then, the
// deciding transaction has committed: the slot is never reused early. A
// fail no_capacity (no room) or provider_offline (the agent stopping) frees
// no slot: the device gets no offer until its next slots report or hello.
//
// # Offers that never arrive
//
// An offer is leased before it is written. One the session cannot take (it
// ended while the lease ran: an ended session writes nothing; or its grants
// could not be made) is withdrawn at once through the service layer's
// Withdraw, which queues the job again without charging the attempt. A
// device that closes its session with a normal closure (the agent
// stopping) acts on nothing more sent there: the offers written on it that
// no frame of it named are withdrawn when it ends. Withdraw refuses an
// attempt the device acted on, so a wrong guess costs nothing.
//
// # Notifications
//
// Run holds one dedicated connection LISTENing on server.CancelChannel and
// JobsChannel, reconnecting with backoff. A cancel notice is routed to the
// device's sessions on this gateway, whichever gateway's pool executed the
// cancel. Postgres keeps nothing for a listener that was away, so every
// (re)subscribe reconciles from the rows, and a new session is told about
// the cancelling jobs it holds. A jobs notice naming a service wakes one
// session that offers it and has a free slot not already promised to an
// earlier notice, in rotation, so one new job costs one Lease instead of one
// per idle device; a session that cannot serve its promise, an empty notice,
// a requeue, a reconnect and the PollInterval fallback wake every session
// that offers the service. While the listener is subscribed, a Lease
// that answers no_job is remembered per service until the next jobs
// notice, requeue, poll finding or resubscribe, and offer passes for those
// services run no Lease meanwhile (emptyQueues; counted in
// rendermac_leases_skipped_total): a drained queue costs one no_job Lease,
// not one per freed slot. The sweeper runs
// every SweepInterval in whichever gateway wins a transaction-scoped
// advisory lock for that pass.
//
// # Resources
//
// A session's one long-lived goroutine is its reader, started when the
// upgrade succeeds (the HTTP handler returns at once, so net/http's request
// state is not held for the session's life); coder/websocket v1.8 starts no
// goroutine of its own per connection (its read and write deadlines are
// context.AfterFunc callbacks). Offer passes, commit and fail workers and
// notice writes run in goroutines that end with their work, and the
// heartbeat is a timer (Config.Clock's AfterFunc) that pings from the
// timer's goroutine and re-arms. So an idle, welcomed session is a parked
// reader and one pending timer: it wakes for its heartbeat and for nothing
// else (Wakeups counts what woke sessions; `rendermac bench` shows it).
//
// # Time
//
// With an unpinned Config.Clock (nil is clock.Real) every decision uses the
// database clock (a zero now), so gateways with skewed clocks agree; with a
// pinned one (clock.Stub) the harness pins every decision and the loops'
// timers.
package gateway
