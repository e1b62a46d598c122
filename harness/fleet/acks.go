package fleet

import (
	"context"
	"fmt"

	"github.com/rendermac/rendermac/harness/soak"
)

// checkTerminalWebhooks: every terminal webhook the receiver acknowledged
// is for a job the database holds in that terminal state. A failover that
// lost an acknowledged commit leaves a buyer told of an outcome that no
// longer exists (or a delivery id the outbox now gives another event).
func (r *run) checkTerminalWebhooks(ctx context.Context) (soak.Check, error) {
	c := soak.Check{ID: "webhook-terminal", Name: "every terminal webhook delivered is for a job the database holds in that terminal state"}
	acked := r.hook.Acknowledged()
	jobs := make([]string, 0, len(acked))
	for _, a := range acked {
		jobs = append(jobs, a.Job)
	}
	status := map[string]string{}
	rows, err := r.obs.Query(ctx, `SELECT j.id::text, j.status FROM jobs j WHERE j.id = ANY($1::uuid[])`, jobs)
	if err != nil {
		return c, err
	}
	if err := soak.EachRow(rows, func(id, st string) { status[id] = st }); err != nil {
		return c, err
	}
	for _, a := range acked {
		switch st, ok := status[a.Job]; {
		case !ok:
			c.Add("delivery %d told buyer %s job %s %s, but the database holds no such job", a.ID, a.Buyer, a.Job, a.Event)
		case st != a.Event:
			c.Add("delivery %d told buyer %s job %s %s, but the job is %s", a.ID, a.Buyer, a.Job, a.Event, st)
		}
	}
	c.Examined = fmt.Sprintf("%d acknowledged deliveries", len(acked))
	return c, nil
}

// checkJournalChains: the journal has no hole. Each job's and each
// attempt's rows, in order, form one chain: the first is the insert (no
// from status), each next starts where the one before ended, and the last
// ends at the row's status now; every job and attempt has its chain.
func (r *run) checkJournalChains(ctx context.Context) (soak.Check, error) {
	c := soak.Check{ID: "journal-chain", Name: "the journal has no hole (each job's and attempt's events chain from its insert to its status)"}
	var events int
	if err := r.obs.QueryRow(ctx, `SELECT count(*) FROM job_events`).Scan(&events); err != nil {
		return c, err
	}
	c.Examined = fmt.Sprintf("%d journal rows", events)
	rows, err := r.obs.Query(ctx, `
WITH e AS (
    SELECT kind, job_id, attempt_id, id, nullif(from_status, '') AS from_status, to_status,
           lag(to_status) OVER w AS prev, lead(id) OVER w AS next
    FROM job_events WINDOW w AS (PARTITION BY kind, job_id, attempt_id ORDER BY id))
SELECT format('%s %s: event %s goes %s -> %s after %s', kind, coalesce(attempt_id, job_id), id,
              coalesce(from_status, '(insert)'), to_status, coalesce(prev, '(nothing)')), ''
FROM e WHERE from_status IS DISTINCT FROM prev
UNION ALL
SELECT format('job %s is %s, its journal ends at %s', j.id, j.status, coalesce(e.to_status, '(no event)')), ''
FROM jobs j LEFT JOIN e ON e.kind = 'job' AND e.job_id = j.id AND e.next IS NULL
WHERE e.to_status IS DISTINCT FROM j.status
UNION ALL
SELECT format('attempt %s is %s, its journal ends at %s', a.id, a.status, coalesce(e.to_status, '(no event)')), ''
FROM job_attempts a LEFT JOIN e ON e.kind = 'attempt' AND e.attempt_id = a.id AND e.next IS NULL
WHERE e.to_status IS DISTINCT FROM a.status
ORDER BY 1`)
	if err != nil {
		return c, err
	}
	return c, soak.EachRow(rows, func(what, _ string) { c.Add("%s", what) })
}
