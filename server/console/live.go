package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// Live updates. One hub per console LISTENs on the control plane's
// existing channels (fencing.CancelChannel, JobsChannel, LostChannel) while
// at least one browser watches, and between notifications reads the
// journal's head every poll interval: an agent's progress and commit
// notify nobody (a NOTIFY in the commit transaction would serialize
// commits on Postgres's notification queue), but each of them appends a
// journal row. Every change is pushed to the watchers as a server-sent
// event naming the jobs it touched; the page's script then re-fetches the
// page. The pages themselves never depend on it.

const (
	sqlJournalHead = `SELECT coalesce(max(id), 0) FROM job_events`
	// sqlJournalSince names the jobs of the journal rows after $1.
	sqlJournalSince = `SELECT id, job_id::text FROM job_events WHERE id > $1 ORDER BY id LIMIT 1000`
	// keepAlive is how often an idle stream gets a comment, so proxies and
	// the browser keep it open.
	keepAlive = 15 * time.Second
)

// change is one event: the jobs whose rows changed (empty: unknown, every
// page refreshes).
type change struct {
	Jobs []string `json:"jobs"`
}

type hub struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	poll time.Duration

	mu   sync.Mutex
	subs map[chan change]struct{}
	stop context.CancelFunc
	done chan struct{}
}

func newHub(pool *pgxpool.Pool, log *slog.Logger, poll time.Duration) *hub {
	return &hub{pool: pool, log: log, poll: poll, subs: map[chan change]struct{}{}}
}

// subscribe adds a watcher; the first one starts the hub's loop, and the
// returned function removes it (the last one stops the loop).
func (h *hub) subscribe() (<-chan change, func()) {
	ch := make(chan change, 8)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[ch] = struct{}{}
	if h.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		h.stop, h.done = cancel, done
		go func() {
			defer close(done)
			h.run(ctx)
		}()
	}
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		var done chan struct{}
		if len(h.subs) == 0 && h.stop != nil {
			h.stop()
			done, h.stop, h.done = h.done, nil, nil
		}
		h.mu.Unlock()
		if done != nil {
			<-done
		}
	}
}

func (h *hub) publish(c change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- c:
		default: // a slow watcher misses an event; the next one refreshes it
		}
	}
}

// run watches until ctx ends: notifications as they come, the journal's
// head every poll interval.
func (h *hub) run(ctx context.Context) {
	notes := make(chan string, 64)
	go h.listen(ctx, notes)
	var head int64
	if err := h.pool.QueryRow(ctx, sqlJournalHead).Scan(&head); err != nil && ctx.Err() == nil {
		h.log.Warn("console: read journal head", "err", err)
	}
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		var jobs []string
		select {
		case <-ctx.Done():
			return
		case job := <-notes:
			if job != "" {
				jobs = append(jobs, job)
			}
		case <-t.C:
		}
		moved, err := h.journalSince(ctx, &head)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("console: read journal", "err", err)
			}
			continue
		}
		jobs = append(jobs, moved...)
		if len(jobs) > 0 {
			slices.Sort(jobs)
			h.publish(change{Jobs: slices.Compact(jobs)})
		}
	}
}

// journalSince returns the jobs of the journal rows after *head and moves
// it to the last one read.
func (h *hub) journalSince(ctx context.Context, head *int64) ([]string, error) {
	rows, err := h.pool.Query(ctx, sqlJournalSince, *head)
	if err != nil {
		return nil, err
	}
	var id int64
	var job string
	var jobs []string
	_, err = pgx.ForEachRow(rows, []any{&id, &job}, func() error {
		*head, jobs = id, append(jobs, job)
		return nil
	})
	return jobs, err
}

// listen LISTENs on the control plane's channels on a connection of its
// own and sends each notification's job id ("" when the payload names
// none) until ctx ends; a lost connection is retried every poll interval
// (the journal poll keeps pages current meanwhile).
func (h *hub) listen(ctx context.Context, notes chan<- string) {
	for ctx.Err() == nil {
		err := h.listenOnce(ctx, notes)
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("console: notification listener lost", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.poll):
		}
	}
}

func (h *hub) listenOnce(ctx context.Context, notes chan<- string) error {
	conn, err := pgx.ConnectConfig(ctx, h.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect listener: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for _, ch := range []string{fencing.CancelChannel, fencing.JobsChannel, fencing.LostChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	for {
		n, err := store.AwaitNotification(ctx, conn)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		var p struct {
			JobID string `json:"job_id"`
		}
		_ = json.Unmarshal([]byte(n.Payload), &p) // the jobs channel's payload is a service name
		select {
		case notes <- p.JobID:
		default:
		}
	}
}

// events is GET /console/events: a text/event-stream of changes, each
// `event: change` with `data: {"jobs":[...]}`, until the client leaves or
// the console shuts down.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	ch, unsubscribe := c.hub.subscribe()
	defer unsubscribe()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n: console live updates\n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	t := time.NewTicker(keepAlive)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.shutdown:
			return
		case <-t.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case ev := <-ch:
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
