// Package webhook delivers the terminal job events of the webhook_outbox
// table to buyers' endpoints (SPEC section 6), at least once.
//
// # Delivery
//
// The service layer appends one outbox row in the same transaction as a
// job's terminal transition. A Deliverer claims due rows with FOR UPDATE
// SKIP LOCKED in a statement that also counts the attempt and pushes
// next_attempt_at out by a claim lease, and commits at once: the HTTP POST
// then runs outside any transaction, so a slow endpoint holds no lock, and
// several deliverers (several server processes) never claim one row
// together. A 2xx sets delivered_at; anything else records last_error and
// schedules the next attempt with exponential backoff (Backoff). A
// deliverer that dies mid-POST leaves the row to be claimed again when the
// lease runs out. Nothing is ever given up on, so a receiver may see an
// event more than once, and never zero times: it should deduplicate by
// delivery_id (also sent as the webhook-id and X-RenderMac-Delivery
// headers).
//
// A row whose buyer has no webhook_url is written already delivered, with
// last_error 'no webhook url' (server's sqlEnqueueWebhook), so it records
// why nothing was sent and never waits in the outbox. Rows of a buyer whose
// URL was removed after they were written are marked so by the deliverer.
//
// # Signing
//
// Each POST is signed in the Standard Webhooks format
// (https://www.standardwebhooks.com): webhook-id is the delivery id (the
// same on every retry), webhook-timestamp the attempt's Unix seconds, and
// webhook-signature "v1," + base64 HMAC-SHA256 of "id.timestamp.body"
// keyed with the buyer's key (StandardSign). That key is not stored
// anywhere: it is derived as HMAC-SHA256(server signing key, "rendermac
// webhook secret v1\n" + buyer id) (BuyerKey), so the database holds
// nothing that forges a webhook. A buyer is given it as "whsec_" + base64
// (StandardSecret, `rendermac admin webhook-secret`), which the standard's
// verifiers take as it is. The label keeps derived keys apart from grant
// signatures made with the same signing key. Rotating the signing key
// rotates every buyer's secret.
//
// The deprecated X-RenderMac-Signature (sha256= hex HMAC-SHA256 of the
// body, keyed with the string "whsec_" + hex of the same key: BuyerSecret)
// is sent as well for one release; it covers no timestamp.
//
// # Time
//
// The deliverer's decisions (what is due, when to retry) use the database
// clock unless Config.Clock is pinned (clock.Stub), whose instant they then
// take; either way Config.Clock paces polling.
package webhook
