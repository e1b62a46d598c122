package scenarios

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rendermac/rendermac/protocol/buyer"
)

// Both listings of SPEC section 6 paged from the first page to the last:
// the buyer's jobs while more are inserted between pages, and a job's
// journal followed by its cursor while the job goes on. What must hold
// whatever was inserted: every job that existed at the first page is
// listed exactly once, newest first by (created_at, id) across all pages;
// every event is seen once, in seq order; the cursors and has_more say
// exactly when there is more.

func init() { scCommands["list"] = cmdList }

// scEventsCursor is where `list events JOB from=last` goes on: the last
// next_cursor of JOB's journal and the seq it points after.
type scEventsCursor struct {
	cursor string
	seq    int64
}

// cmdList pages a listing from its first page to its last and checks it.
//
// `list jobs [limit=N] [insert=K]` pages GET /v1/jobs (limit= left out:
// the server's default), creating K jobs between pages. The jobs listed
// must be strictly newest first by (created_at, id) across the pages,
// none twice, every job of the buyer that existed before the first page
// among them; a page with a next_cursor must be full and followed by a
// page that is not empty, and the last page carries none.
//
// `list events JOB [limit=N] [from=last]` pages GET /v1/jobs/{id}/events
// from the start, or from where the last `list events JOB` ended. The
// events must be the journal's rows of the job after that point, each
// once, in seq order; every page carries a next_cursor, has_more exactly
// when the next page is not empty (and then the page is full).
//
// After `->`: pages=P, jobs=N (jobs listed) or events=N (events seen).
// Example: list jobs limit=7 insert=2
// Example: list events j1 limit=2 from=last -> events=3
func cmdList(r *scRun, st scStep) error {
	limit := 0
	if v := st.opt("limit", ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("list: limit=%s: want a page size", v)
		}
		limit = n
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	var got map[string]int
	switch arg(st, 0) {
	case "jobs":
		got, err = r.listJobs(gw.baseURL(), limit, st)
	case "events":
		got, err = r.listEvents(gw.baseURL(), arg(st, 1), limit, st)
	default:
		return errors.New("want: list jobs [limit=N] [insert=K] | list events JOB [limit=N] [from=last] -> [pages=P] [jobs=N|events=N]")
	}
	if err != nil {
		return err
	}
	var seen []string
	for _, w := range st.arrow {
		k, v, _ := strings.Cut(w, "=")
		n, err := strconv.Atoi(v)
		if _, known := got[k]; !known || err != nil {
			return fmt.Errorf("list: bad expectation %q", w)
		}
		if got[k] != n {
			return fmt.Errorf("list %s: want %s, got %s=%d", arg(st, 0), w, k, got[k])
		}
		seen = append(seen, w)
	}
	r.reply(strings.TrimSpace("list " + arg(st, 0) + " " + strings.Join(seen, " ")))
	return nil
}

// pageQuery renders limit= and cursor= (either left out when zero).
func pageQuery(limit int, cursor string) string {
	var q []string
	if limit > 0 {
		q = append(q, "limit="+strconv.Itoa(limit))
	}
	if cursor != "" {
		q = append(q, "cursor="+url.QueryEscape(cursor))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + strings.Join(q, "&")
}

// getPage GETs one page into out, which must answer 200.
func (r *scRun) getPage(base, path string, out any) error {
	rep, err := r.apiDo(base, http.MethodGet, path, r.apiKey, nil, nil)
	if err != nil {
		return err
	}
	if rep.status != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %.300s", path, rep.status, rep.body)
	}
	if err := json.Unmarshal(rep.body, out); err != nil {
		return fmt.Errorf("GET %s: bad body %.300s: %w", path, rep.body, err)
	}
	return nil
}

func (r *scRun) listJobs(base string, limit int, st scStep) (map[string]int, error) {
	insert, err := optInt(st, "insert", 0)
	if err != nil {
		return nil, err
	}
	size := limit
	if size == 0 {
		size = 100 // SPEC section 6: the default page size
	}
	existed, err := r.jobIDs(r.ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var prev *buyer.Job
	cursor, pages, inserted, followsCursor := "", 0, 0, false
	for {
		var page struct {
			Jobs       []buyer.Job `json:"jobs"`
			NextCursor *string     `json:"next_cursor"`
		}
		path := "/v1/jobs" + pageQuery(limit, cursor)
		if err := r.getPage(base, path, &page); err != nil {
			return nil, err
		}
		pages++
		next := ""
		if page.NextCursor != nil {
			if next = *page.NextCursor; next == "" {
				return nil, fmt.Errorf("list jobs: page %d carries an empty next_cursor (absent means the last page)", pages)
			}
		}
		switch {
		case len(page.Jobs) > size:
			return nil, fmt.Errorf("list jobs: page %d holds %d jobs, limit %d", pages, len(page.Jobs), size)
		case next != "" && len(page.Jobs) != size:
			return nil, fmt.Errorf("list jobs: page %d carries a next_cursor with %d jobs, not a full page of %d", pages, len(page.Jobs), size)
		case followsCursor && len(page.Jobs) == 0:
			return nil, fmt.Errorf("list jobs: page %d, reached by the previous page's next_cursor, is empty: that page was the last", pages)
		}
		for i := range page.Jobs {
			j := &page.Jobs[i]
			if seen[j.ID] {
				return nil, fmt.Errorf("list jobs: %s listed twice (page %d)", r.name(j.ID), pages)
			}
			seen[j.ID] = true
			if prev != nil && !newerFirst(prev, j) {
				return nil, fmt.Errorf("list jobs: page %d lists %s (%s) after %s (%s): not newest first by (created_at, id)",
					pages, r.name(j.ID), j.CreatedAt.Format("15:04:05.000000"), r.name(prev.ID), prev.CreatedAt.Format("15:04:05.000000"))
			}
			prev = j
		}
		if next == "" {
			break
		}
		cursor, followsCursor = next, true
		if insert > 0 { // named on from the run's earlier inserts
			if err := r.createJobs(base, "ins", int(r.counter("list.inserted"))+1, insert); err != nil {
				return nil, err
			}
			r.count("list.inserted", int64(insert))
			inserted += insert
		}
	}
	var missing []string
	for id := range existed {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("list jobs: %d jobs that existed at the first page were never listed: %s", len(missing), r.sortedNames(missing))
	}
	r.count("list.jobs_pages", int64(pages))
	r.tl.add(laneGateway, fmt.Sprintf("buyer paged GET /v1/jobs (limit %d): %d pages, %d jobs, each of the %d before the first page once; %d inserted meanwhile, %d of them listed",
		size, pages, len(seen), len(existed), inserted, len(seen)-len(existed)))
	return map[string]int{"pages": pages, "jobs": len(seen)}, nil
}

// newerFirst reports whether a comes strictly before b in newest-first
// (created_at, id) order. Canonical uuid text orders as Postgres orders uuids.
func newerFirst(a, b *buyer.Job) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

func (r *scRun) listEvents(base, job string, limit int, st scStep) (map[string]int, error) {
	id, err := r.jobID(job)
	if err != nil {
		return nil, err
	}
	surface := r.surfaceState()
	var from scEventsCursor
	switch st.opt("from", "start") {
	case "start":
	case "last":
		var ok bool
		if from, ok = surface.events[job]; !ok {
			return nil, fmt.Errorf("list events %s from=last: no earlier `list events %s`", job, job)
		}
	default:
		return nil, errors.New("list events: from=start or from=last")
	}
	size := limit
	if size == 0 {
		size = 100
	}
	before, err := r.journalOf(id, from.seq)
	if err != nil {
		return nil, err
	}
	var seqs []int64
	cursor, last, pages, hadMore := from.cursor, from.seq, 0, false
	for {
		var page struct {
			Events     []buyer.Event `json:"events"`
			NextCursor string        `json:"next_cursor"`
			HasMore    *bool         `json:"has_more"`
		}
		path := "/v1/jobs/" + id + "/events" + pageQuery(limit, cursor)
		if err := r.getPage(base, path, &page); err != nil {
			return nil, err
		}
		pages++
		switch {
		case page.NextCursor == "":
			return nil, fmt.Errorf("list events %s: page %d carries no next_cursor", job, pages)
		case page.HasMore == nil:
			return nil, fmt.Errorf("list events %s: page %d carries no has_more", job, pages)
		case len(page.Events) > size:
			return nil, fmt.Errorf("list events %s: page %d holds %d events, limit %d", job, pages, len(page.Events), size)
		case *page.HasMore && len(page.Events) != size:
			return nil, fmt.Errorf("list events %s: page %d says has_more with %d events, not a full page of %d", job, pages, len(page.Events), size)
		case hadMore && len(page.Events) == 0:
			return nil, fmt.Errorf("list events %s: page %d is empty, yet the page before it said has_more", job, pages)
		}
		for _, e := range page.Events {
			if e.Seq <= last {
				return nil, fmt.Errorf("list events %s: page %d gives seq %d after seq %d: an event seen twice or out of order", job, pages, e.Seq, last)
			}
			last = e.Seq
			seqs = append(seqs, e.Seq)
		}
		cursor, hadMore = page.NextCursor, *page.HasMore
		if !hadMore {
			break
		}
	}
	after, err := r.journalOf(id, from.seq)
	if err != nil {
		return nil, err
	}
	// Rows appended while paging may or may not be seen; every row there
	// before the first page must be, and nothing that is not a row.
	if !isPrefix(before, seqs) || !isPrefix(seqs, after) {
		return nil, fmt.Errorf("list events %s: saw seqs %v after seq %d; the journal holds %v (before paging) and %v (after)",
			job, seqs, from.seq, before, after)
	}
	surface.events[job] = scEventsCursor{cursor: cursor, seq: last}
	r.count("list.events", int64(len(seqs)))
	r.tl.add(laneGateway, fmt.Sprintf("buyer paged GET /v1/jobs/%s/events (limit %d) from seq %d: %d pages, events %v",
		job, size, from.seq, pages, seqs))
	return map[string]int{"pages": pages, "events": len(seqs)}, nil
}

// journalOf returns the seqs of a job's journal rows after seq, in order.
func (r *scRun) journalOf(jobID string, seq int64) ([]int64, error) {
	rows, err := r.observer.Query(r.ctx, `SELECT id FROM job_events WHERE job_id = $1 AND id > $2 ORDER BY id`, jobID, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// isPrefix reports whether a is a prefix of b.
func isPrefix(a, b []int64) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
