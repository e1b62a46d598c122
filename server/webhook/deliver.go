package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/store"
)

// Defaults of Config.
const (
	DefaultPollInterval = time.Second
	DefaultBatchSize    = 32
	DefaultTimeout      = 10 * time.Second
	DefaultBackoffBase  = 10 * time.Second
	DefaultBackoffMax   = time.Hour
)

// Limits on what is kept of a failure and read of a reply.
const (
	maxLastError  = 512
	maxReplyBytes = 64 << 10
)

// Config tunes a Deliverer. Zero fields take the defaults.
type Config struct {
	// Clock paces Run's polling. A pinned clock (tests: clock.Stub) is
	// also the instant of Run's decisions; an unpinned one (nil is
	// clock.Real) leaves them to the database clock.
	Clock        clock.Clock
	PollInterval time.Duration
	// BatchSize bounds the rows one pass claims (and POSTs concurrently).
	BatchSize int
	// Timeout bounds one POST, response included.
	Timeout time.Duration
	// ClaimTTL is how long a claimed row is withheld from other deliverers;
	// a deliverer that dies mid-POST delays the retry by this much. Default
	// Timeout plus a minute, so a live deliverer always records first.
	ClaimTTL time.Duration
	// BackoffBase and BackoffMax shape the retry schedule (see Backoff).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Client posts deliveries; nil is a client that does not follow
	// redirects (a 3xx is a failed attempt, not a reason to POST elsewhere).
	Client *http.Client
}

// Deliverer delivers outbox rows. It is safe for concurrent use, and any
// number of Deliverers (one per server process) may share a database.
type Deliverer struct {
	pool   *pgxpool.Pool
	key    []byte
	m      *metrics.Metrics
	log    *slog.Logger
	cfg    Config
	client *http.Client
}

// New returns a Deliverer over pool that derives buyers' secrets from
// signingKey (at least grant.MinKeyBytes long).
func New(pool *pgxpool.Pool, signingKey []byte, m *metrics.Metrics, log *slog.Logger, cfg Config) (*Deliverer, error) {
	if len(signingKey) < grant.MinKeyBytes {
		return nil, fmt.Errorf("webhook: signing key is %d bytes, want at least %d", len(signingKey), grant.MinKeyBytes)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = cfg.Timeout + time.Minute
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	cfg.BackoffMax = max(cfg.BackoffMax, cfg.BackoffBase)
	client := cfg.Client
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Deliverer{pool: pool, key: append([]byte(nil), signingKey...), m: m, log: log, cfg: cfg, client: client}, nil
}

// Backoff is the wait after the attempts-th failed attempt: base, 2*base,
// 4*base, ... capped at limit. No jitter: retries of one receiver's events
// spread by their own failure times, and a fixed schedule is testable.
func Backoff(base, limit time.Duration, attempts int) time.Duration {
	d := base
	for i := 1; i < attempts && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Result counts what one DeliverDue pass did.
type Result struct {
	// Claimed rows were attempted (POSTed, or found to have no URL).
	Claimed int
	// Delivered got a 2xx; Failed did not and are scheduled again.
	Delivered, Failed int
	// NoURL rows were marked delivered with last_error 'no webhook url'.
	NoURL int
}

// Run delivers until ctx ends, polling every PollInterval (at once again
// after a full batch, which suggests more rows are due). A failed pass is
// logged and retried at the next poll. It returns nil when ctx ends.
func (d *Deliverer) Run(ctx context.Context) error {
	for {
		res, err := d.DeliverDue(ctx, clock.PinnedNow(d.cfg.Clock))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			d.log.WarnContext(ctx, "webhook pass failed", "err", err)
		} else if res.Claimed >= d.cfg.BatchSize {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.cfg.Clock.After(d.cfg.PollInterval):
		}
	}
}

// DeliverDue runs one pass at now (zero: the database clock): rows of
// buyers without a URL are marked delivered, then up to BatchSize due rows
// are claimed and POSTed concurrently, and each outcome is recorded.
func (d *Deliverer) DeliverDue(ctx context.Context, now time.Time) (Result, error) {
	var res Result
	ctx = dbstat.WithOp(ctx, "webhook")
	pinned := now
	now, err := store.ResolveNow(ctx, d.pool, now)
	if err != nil {
		return res, fmt.Errorf("webhook: %w", err)
	}
	tag, err := d.pool.Exec(ctx, sqlMarkNoURL, now)
	if err != nil {
		return res, fmt.Errorf("webhook: mark rows without url: %w", err)
	}
	res.NoURL = int(tag.RowsAffected())
	d.m.Webhooks.WithLabelValues("no_url").Add(float64(res.NoURL))
	rows, err := d.claim(ctx, now)
	if err != nil {
		return res, err
	}
	res.Claimed = len(rows)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, row := range rows {
		wg.Go(func() {
			outcome, err := d.attempt(ctx, row, now, pinned)
			mu.Lock()
			defer mu.Unlock()
			switch outcome {
			case "delivered":
				res.Delivered++
			case "no_url":
				res.NoURL++
			case "failed":
				res.Failed++
			}
			errs = append(errs, err)
		})
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

func (d *Deliverer) claim(ctx context.Context, now time.Time) ([]row, error) {
	rows, err := d.pool.Query(ctx, sqlClaim, now, d.cfg.BatchSize, now.Add(d.cfg.ClaimTTL))
	if err != nil {
		return nil, fmt.Errorf("webhook: claim: %w", err)
	}
	claimed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var w row
		err := r.Scan(&w.ID, &w.JobID, &w.BuyerID, &w.Event, &w.Payload, &w.CreatedAt, &w.Attempts, &w.URL)
		w.CreatedAt = w.CreatedAt.UTC()
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook: claim: %w", err)
	}
	return claimed, nil
}

// attempt POSTs one claimed row, stamped sent (the pass's instant), and
// records the outcome at pinned (zero: the database clock after the POST).
// The error is only for failing to record it; a failed POST is an outcome.
func (d *Deliverer) attempt(ctx context.Context, w row, sent, pinned time.Time) (outcome string, err error) {
	var postErr error
	if w.URL != "" { // else the URL was removed after the no-URL pass
		postErr = d.post(ctx, w, sent)
	}
	at, err := store.ResolveNow(ctx, d.pool, pinned)
	if err != nil {
		return "", fmt.Errorf("webhook: %w", err)
	}
	switch {
	case w.URL == "":
		d.m.Webhooks.WithLabelValues("no_url").Inc()
		return "no_url", d.exec(ctx, sqlDelivered, w.ID, at, noURL)
	case postErr == nil:
		d.m.Webhooks.WithLabelValues("delivered").Inc()
		d.log.InfoContext(ctx, "webhook delivered", "delivery_id", w.ID, "job_id", w.JobID, "event", w.Event,
			"attempts", w.Attempts)
		return "delivered", d.exec(ctx, sqlDelivered, w.ID, at, nil)
	}
	d.m.Webhooks.WithLabelValues("failed").Inc()
	next := at.Add(Backoff(d.cfg.BackoffBase, d.cfg.BackoffMax, w.Attempts))
	msg := truncate(postErr.Error(), maxLastError)
	d.log.WarnContext(ctx, "webhook attempt failed", "delivery_id", w.ID, "job_id", w.JobID,
		"attempts", w.Attempts, "next_attempt_at", next, "err", msg)
	return "failed", d.exec(ctx, sqlFailed, w.ID, w.Attempts, msg, next)
}

// exec records an outcome. If it fails, the claim lease runs out and the
// row is delivered again: at least once, never zero times.
func (d *Deliverer) exec(ctx context.Context, sql string, id int64, args ...any) error {
	if _, err := d.pool.Exec(ctx, sql, append([]any{id}, args...)...); err != nil {
		return fmt.Errorf("webhook: record delivery %d: %w", id, err)
	}
	return nil
}

// post sends one delivery stamped sent and returns why it failed, or nil
// after a 2xx. The error never contains the URL, which may itself carry a
// secret. The webhook-id is the outbox row id, so every retry of one event
// carries the same one (receivers deduplicate by it); the timestamp and
// the standard signature are those of this attempt.
func (d *Deliverer) post(ctx context.Context, w row, sent time.Time) error {
	body, err := json.Marshal(Delivery{DeliveryID: w.ID, Event: w.Event, JobID: w.JobID, CreatedAt: w.CreatedAt, Data: w.Payload})
	if err != nil {
		return fmt.Errorf("encode delivery: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("invalid webhook url")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "rendermac-webhook/1")
	req.Header.Set(EventHeader, w.Event)
	id := strconv.FormatInt(w.ID, 10)
	msgID := id // the webhook-id: the delivery id, never the attempt
	req.Header.Set(DeliveryHeader, id)
	req.Header.Set(IDHeader, msgID)
	req.Header.Set(TimestampHeader, strconv.FormatInt(sent.Unix(), 10))
	req.Header.Set(StandardSignatureHeader, StandardSign(BuyerKey(d.key, w.BuyerID), msgID, sent, body))
	req.Header.Set(SignatureHeader, Sign(BuyerSecret(d.key, w.BuyerID), body))
	resp, err := d.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReplyBytes)) // lets the connection be reused
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("http %d", resp.StatusCode)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
