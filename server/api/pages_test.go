package api_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// page is one decoded page of GET /v1/jobs or /events.
type page struct {
	ids        []string
	createdAt  []time.Time
	seqs       []int64
	nextCursor string
	hasMore    bool
}

func (b *bundle) jobsPage(t *testing.T, key, query string) page {
	t.Helper()
	r := b.do(t, http.MethodGet, "/v1/jobs?"+query, key, nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	m := r.json(t)
	var p page
	for _, j := range m["jobs"].([]any) {
		job := j.(map[string]any)
		p.ids = append(p.ids, job["id"].(string))
		at, err := time.Parse(time.RFC3339Nano, job["created_at"].(string))
		require.NoError(t, err)
		p.createdAt = append(p.createdAt, at)
	}
	p.nextCursor, _ = m["next_cursor"].(string)
	return p
}

func (b *bundle) eventsPage(t *testing.T, key, id, query string) page {
	t.Helper()
	r := b.do(t, http.MethodGet, "/v1/jobs/"+id+"/events?"+query, key, nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	m := r.json(t)
	var p page
	for _, e := range m["events"].([]any) {
		p.seqs = append(p.seqs, int64(e.(map[string]any)["seq"].(float64)))
	}
	p.nextCursor = m["next_cursor"].(string)
	p.hasMore = m["has_more"].(bool)
	return p
}

// Paging through GET /v1/jobs while another goroutine keeps creating jobs
// of the same buyer never repeats a job and never skips one that existed
// before the first page, and every page is in (created_at, id) DESC order.
// The new jobs share created_at with half of the old ones (the clock stands
// still while paging), so their random ids land on pages already read and
// on pages still to come alike: an OFFSET listing would shift and repeat.
func TestJobsPagesAreStableUnderConcurrentInserts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var before []string
	for i := range 30 {
		if i == 15 {
			b.advance(time.Second) // 15 jobs at t0, 15 tied at t0+1s
		}
		before = append(before, b.newJob(t))
	}

	stop := make(chan struct{})
	inserted := make(chan string, 64)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(inserted)
		for range 40 {
			select {
			case <-stop:
				return
			default:
			}
			r := b.createJob(t, b.key, `{"service":"synthetic.mp4","params":{"seed":"late"}}`)
			if r.Status != http.StatusCreated {
				t.Errorf("concurrent create: HTTP %d %s", r.Status, r.Body)
				return
			}
			inserted <- r.json(t)["id"].(string)
		}
	})

	var seen []string
	var times []time.Time
	pages, cursor := 0, ""
	for {
		require.Less(t, pages, 40, "paging does not end")
		q := url.Values{"limit": {"7"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		p := b.jobsPage(t, b.key, q.Encode())
		pages++
		require.LessOrEqual(t, len(p.ids), 7)
		seen = append(seen, p.ids...)
		times = append(times, p.createdAt...)
		if p.nextCursor == "" {
			break
		}
		cursor = p.nextCursor
		<-inserted // at least one insert lands between any two pages
		<-inserted
	}
	close(stop)
	wg.Wait()
	var late []string
	for id := range inserted {
		late = append(late, id)
	}

	sorted := slices.Clone(seen)
	slices.Sort(sorted)
	require.Len(t, slices.Compact(sorted), len(seen), "a job appeared on two pages")
	for _, id := range before {
		require.Contains(t, seen, id, "a job that existed before the first page was skipped")
	}
	for i := 1; i < len(seen); i++ {
		ordered := times[i].Before(times[i-1]) || (times[i].Equal(times[i-1]) && seen[i] < seen[i-1])
		require.True(t, ordered, "page order broken at %d: %s %s after %s %s", i, times[i], seen[i], times[i-1], seen[i-1])
	}
	require.GreaterOrEqual(t, pages, 5)
	t.Logf("%d pages, %d jobs listed: %d from before, %d created while paging (%d of them listed)",
		pages, len(seen), len(before), len(seen)-len(before)+len(late), len(seen)-len(before))
}

// tamper flips one bit of a cursor's decoded bytes at i (from the end
// when negative).
func tamper(t *testing.T, cursor string, i int) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	require.NoError(t, err)
	if i < 0 {
		i += len(raw)
	}
	raw[i] ^= 0x01
	return base64.RawURLEncoding.EncodeToString(raw)
}

// limit is 1..500 on both listings; a cursor that is garbled, tampered
// with, another buyer's, or issued for another status filter or job is
// 400 invalid_cursor naming "cursor", and another buyer never sees the
// first buyer's jobs through any cursor.
func TestPageLimitsAndCursorsAreChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.newJob(t)
	other := b.newJob(t)
	b.newJob(t)
	for _, path := range []string{"/v1/jobs?", "/v1/jobs/" + id + "/events?"} {
		for _, l := range []string{"0", "501", "-1", "x", "1.5"} {
			requireError(t, b.do(t, http.MethodGet, path+"limit="+l, b.key, nil), http.StatusUnprocessableEntity,
				"validation_error", "limit")
		}
		for _, l := range []string{"1", "500"} {
			require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, path+"limit="+l, b.key, nil).Status)
		}
	}

	jobs := b.jobsPage(t, b.key, "limit=1")
	require.NotEmpty(t, jobs.nextCursor)
	events := b.eventsPage(t, b.key, id, "limit=1")
	require.NotEmpty(t, events.nextCursor)
	bad := map[string]string{
		"/v1/jobs?cursor=not*base64":                                           "garbled",
		"/v1/jobs?cursor=AAAA":                                                 "too short",
		"/v1/jobs?cursor=" + tamper(t, jobs.nextCursor, 3):                     "tampered position",
		"/v1/jobs?cursor=" + tamper(t, jobs.nextCursor, -1):                    "tampered tag",
		"/v1/jobs?cursor=" + tamper(t, jobs.nextCursor, 0):                     "tampered kind",
		"/v1/jobs?status=queued&cursor=" + jobs.nextCursor:                     "another status filter",
		"/v1/jobs?cursor=" + events.nextCursor:                                 "an events cursor",
		"/v1/jobs/" + other + "/events?cursor=" + events.nextCursor:            "another job's",
		"/v1/jobs/" + id + "/events?cursor=" + jobs.nextCursor:                 "a jobs cursor",
		"/v1/jobs/" + id + "/events?cursor=" + tamper(t, events.nextCursor, 4): "tampered seq",
	}
	for path, what := range bad {
		r := b.do(t, http.MethodGet, path, b.key, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", what, r.Body)
		requireError(t, r, http.StatusBadRequest, "invalid_cursor", "cursor")
	}

	// Another buyer: the first buyer's cursor is refused, and no page of
	// its own listing ever holds the first buyer's jobs.
	foreign := b.do(t, http.MethodGet, "/v1/jobs?cursor="+jobs.nextCursor, b.otherKey, nil)
	requireError(t, foreign, http.StatusBadRequest, "invalid_cursor", "cursor")
	require.False(t, strings.Contains(string(foreign.Body), id))
	require.Empty(t, b.jobsPage(t, b.otherKey, "").ids)
	requireError(t, b.do(t, http.MethodGet, "/v1/jobs/"+id+"/events?cursor="+events.nextCursor, b.otherKey, nil),
		http.StatusBadRequest, "invalid_cursor", "cursor")
}

// Following next_cursor through a job's journal one event at a time gives
// the whole journal in order; has_more turns false on the last page, whose
// cursor then returns exactly the events appended later.
func TestEventsPagesWalkTheJournalAndPoll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.newJob(t)
	b.lease(t)
	all := b.eventsPage(t, b.key, id, "")
	require.Len(t, all.seqs, 3)
	require.False(t, all.hasMore)

	var walked []int64
	cursor := ""
	for range 10 {
		p := b.eventsPage(t, b.key, id, "limit=1&cursor="+cursor)
		walked = append(walked, p.seqs...)
		cursor = p.nextCursor
		if !p.hasMore {
			break
		}
	}
	require.Equal(t, all.seqs, walked)
	empty := b.eventsPage(t, b.key, id, "cursor="+cursor)
	require.Empty(t, empty.seqs)
	require.Equal(t, cursor, empty.nextCursor, "an empty page keeps the position")

	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/cancel", b.key, nil).Status)
	after := b.eventsPage(t, b.key, id, "cursor="+cursor)
	require.Len(t, after.seqs, 1, "polling the last cursor returns the new event only")
	require.Greater(t, after.seqs[0], walked[len(walked)-1])
}

// Polling a job's events with next_cursor while another goroutine keeps
// appending to its journal (ten lease and retryable-fail rounds, then a
// final fail) sees every event exactly once, in seq order.
func TestEventsPollingSeesEveryEventOnceUnderConcurrentAppends(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.createJob(t, b.key, `{"service":"synthetic.mp4","params":{"seed":"busy"},"max_attempts":10}`)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	id := r.json(t)["id"].(string)

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		ctx := context.Background()
		for range 10 {
			o, err := b.svc.Lease(ctx, b.clock(), deviceID)
			if err != nil || o.Code != protocol.CodeLeaseOffer {
				t.Errorf("lease: %+v %v", o, err)
				return
			}
			f, err := b.svc.Fail(ctx, b.clock(), deviceID, protocol.Fail{JobID: o.JobID, AttemptID: o.AttemptID,
				LeaseEpoch: o.LeaseEpoch, CommitToken: o.CommitToken, FailureCode: protocol.FailDownloadFailed})
			if err != nil || f.Code != protocol.CodeFailOK {
				t.Errorf("fail: %+v %v", f, err)
				return
			}
		}
	})

	var polled []int64
	cursor, finished := "", false
	for polls := 0; ; polls++ {
		require.Less(t, polls, 2000, "polling never caught up")
		p := b.eventsPage(t, b.key, id, "limit=3&cursor="+cursor)
		polled = append(polled, p.seqs...)
		cursor = p.nextCursor
		if finished && !p.hasMore && len(p.seqs) == 0 {
			break
		}
		select {
		case <-done:
			finished = true
		default:
		}
	}
	wg.Wait()
	all := b.eventsPage(t, b.key, id, "limit=500")
	require.False(t, all.hasMore)
	require.Len(t, all.seqs, 1+10*4, "create, then per round: attempt leased, job active, attempt failed, job queued or failed")
	require.Equal(t, all.seqs, polled, "polling missed, repeated or reordered an event")
}
