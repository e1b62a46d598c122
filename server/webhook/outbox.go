package webhook

import (
	"encoding/json"
	"time"
)

// noURL is the last_error of a row whose buyer has no webhook_url.
const noURL = "no webhook url"

const (
	// Rows of buyers without a URL are settled first, so the claim below
	// only spends attempts on rows that can be sent.
	sqlMarkNoURL = `
UPDATE webhook_outbox o SET delivered_at = $1, last_error = 'no webhook url'
FROM jobs j JOIN buyers b ON b.id = j.buyer_id
WHERE j.id = o.job_id AND b.webhook_url IS NULL AND o.delivered_at IS NULL AND o.next_attempt_at <= $1`

	// The claim: due rows, oldest first, skipping rows another deliverer
	// holds; the attempt is counted and the row withheld until $3 (the
	// claim lease) in the same statement, which commits at once.
	sqlClaim = `
WITH due AS (
    SELECT id FROM webhook_outbox
    WHERE delivered_at IS NULL AND next_attempt_at <= $1
    ORDER BY next_attempt_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED)
UPDATE webhook_outbox o SET attempts = o.attempts + 1, next_attempt_at = $3
FROM due, jobs j, buyers b
WHERE o.id = due.id AND j.id = o.job_id AND b.id = j.buyer_id
RETURNING o.id, o.job_id::text, j.buyer_id::text, o.event, o.payload, o.created_at, o.attempts,
          coalesce(b.webhook_url, '')`

	// A 2xx is final whoever holds the claim now: the event reached the
	// receiver, so the row is done.
	sqlDelivered = `
UPDATE webhook_outbox SET delivered_at = $2, last_error = $3 WHERE id = $1 AND delivered_at IS NULL`

	// A failure is recorded only by the claim that made it (attempts
	// matches), so a deliverer that outlived its lease cannot push back a
	// newer claim's schedule.
	sqlFailed = `
UPDATE webhook_outbox SET last_error = $3, next_attempt_at = $4
WHERE id = $1 AND attempts = $2 AND delivered_at IS NULL`
)

// row is a claimed outbox row with its buyer's URL.
type row struct {
	ID             int64
	JobID, BuyerID string
	Event          string
	Payload        json.RawMessage
	CreatedAt      time.Time
	Attempts       int
	URL            string
}

// Delivery is the JSON body of a webhook POST. Its bytes are the same on
// every retry of one row.
type Delivery struct {
	// DeliveryID identifies the outbox row; deduplicate by it.
	DeliveryID int64 `json:"delivery_id"`
	// Event is the job's terminal status: succeeded, cancelled or failed.
	Event     string    `json:"event"`
	JobID     string    `json:"job_id"`
	CreatedAt time.Time `json:"created_at"`
	// Data is the event as the service layer recorded it
	// ({"job_id","status","failure_code","at"}).
	Data json.RawMessage `json:"data"`
}
