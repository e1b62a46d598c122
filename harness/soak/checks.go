package soak

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/store"
)

// Check is one end-of-soak check and what it found.
type Check struct {
	// ID names the check to the rule trace (docs/semantics.md, "The rule
	// inventory"): qualify's fleet campaign reports it as fleet:ID.
	ID   string
	Name string
	// Examined says over what the check ran (rows, deliveries).
	Examined string
	// Violations are what it found wrong (empty: passed).
	Violations []string
}

// maxListed bounds the violations kept per check.
const maxListed = 20

// Add records a violation (at most maxListed are kept, then a marker).
func (c *Check) Add(format string, args ...any) { c.add(format, args...) }

func (c *Check) add(format string, args ...any) {
	if len(c.Violations) < maxListed {
		c.Violations = append(c.Violations, fmt.Sprintf(format, args...))
	} else if len(c.Violations) == maxListed {
		c.Violations = append(c.Violations, "... (more)")
	}
}

// CheckEnv is what the end-of-run checks read: the database (observer
// pool), the webhook receiver, the artifact store the control plane writes
// (Store, or else a filesystem store on ArtifactDir), the jobs accepted with
// 201 and the number of buyers. The soak and the fleet run (package fleet)
// share the checks through it.
type CheckEnv struct {
	DB          *pgxpool.Pool
	Hook        *Receiver
	ArtifactDir string
	// Store, when set, is a second handle on the control plane's store (an
	// S3 bucket); the checks read outputs through it instead of ArtifactDir.
	Store    artifact.Store
	Accepted []string
	Buyers   int
}

type checker struct{ CheckEnv }

// check runs every check over the rows the soak left and the receiver's
// record, into rep.
func (s *stack) check(ctx context.Context, rep *Report) error {
	return RunChecks(ctx, CheckEnv{DB: s.obs, Hook: s.hook, ArtifactDir: s.dir, Accepted: s.accepted.IDs(), Buyers: buyers}, rep)
}

// RunChecks runs every end-of-run check over the rows left and the
// receiver's record, into rep (outcomes, holds, webhooks and Checks); it
// reads rep.Stats.Faults. An error is a check that could not run.
func RunChecks(ctx context.Context, env CheckEnv, rep *Report) error {
	k := &checker{env}
	var jobs, terminal int
	if err := k.DB.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status IN ('succeeded', 'cancelled', 'failed'))
	    FROM jobs`).Scan(&jobs, &terminal); err != nil {
		return fmt.Errorf("count jobs: %w", err)
	}
	if err := k.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'succeeded'),
	    count(*) FILTER (WHERE status = 'cancelled'), count(*) FILTER (WHERE status = 'failed') FROM jobs`).
		Scan(&rep.Succeeded, &rep.Cancelled, &rep.Failed); err != nil {
		return fmt.Errorf("count outcomes: %w", err)
	}
	rep.Jobs = jobs

	inv := Check{ID: "invariants", Name: "SPEC invariants 1-9 (store.CheckInvariants)", Examined: fmt.Sprintf("%d jobs", jobs)}
	vs, err := store.CheckInvariants(ctx, k.DB)
	if err != nil {
		return fmt.Errorf("invariants: %w", err)
	}
	for _, v := range vs {
		inv.add("%s", v)
	}
	rep.Checks = append(rep.Checks, inv)

	for _, c := range []struct {
		check *Check
		fn    func(context.Context, *Check) error
	}{
		{&Check{ID: "accepted-terminal", Name: "every accepted job reached a terminal state"}, k.checkAccepted},
		{&Check{ID: "one-terminal", Name: "exactly one terminal transition per job (journal)", Examined: fmt.Sprintf("%d jobs", jobs)}, k.checkOneTerminal},
		{&Check{ID: "holds", Name: "every hold settled exactly once, balances add up"}, k.checkHolds(rep)},
		{&Check{ID: "outputs", Name: "succeeded outputs re-read and hashed (store.CheckOutputs, invariant 8)"}, k.checkOutputs(rep)},
		{&Check{ID: "webhooks", Name: "no webhook lost (delivered to the receiver or pending retry)"}, k.checkWebhooks(rep)},
		{&Check{ID: "exercised", Name: "the run exercised the stack (jobs succeeded, faults injected)"}, k.checkExercised(rep)},
	} {
		if err := c.fn(ctx, c.check); err != nil {
			return fmt.Errorf("%s: %w", c.check.Name, err)
		}
		rep.Checks = append(rep.Checks, *c.check)
	}
	return nil
}

func (k *checker) checkAccepted(ctx context.Context, c *Check) error {
	ids := k.Accepted
	c.Examined = fmt.Sprintf("%d accepted jobs", len(ids))
	rows, err := k.DB.Query(ctx, `SELECT a.id, coalesce(j.status, 'missing') FROM unnest($1::uuid[]) AS a(id)
	    LEFT JOIN jobs j ON j.id = a.id WHERE j.status IS NULL OR j.status NOT IN ('succeeded', 'cancelled', 'failed')`, ids)
	if err != nil {
		return err
	}
	return eachRow(rows, func(id, status string) { c.add("job %s (accepted with 201) is %s", id, status) })
}

func (k *checker) checkOneTerminal(ctx context.Context, c *Check) error {
	rows, err := k.DB.Query(ctx, `SELECT j.id::text, format('%s with %s terminal journal rows', j.status, count(e.id))
	    FROM jobs j LEFT JOIN job_events e ON e.job_id = j.id AND e.kind = 'job'
	         AND e.to_status IN ('succeeded', 'cancelled', 'failed')
	    GROUP BY j.id HAVING count(e.id) <> 1 OR min(e.to_status) <> j.status`)
	if err != nil {
		return err
	}
	return eachRow(rows, func(id, what string) { c.add("job %s is %s", id, what) })
}

func (k *checker) checkHolds(rep *Report) func(context.Context, *Check) error {
	return func(ctx context.Context, c *Check) error { return k.holds(ctx, c, rep) }
}

func (k *checker) holds(ctx context.Context, c *Check, rep *Report) error {
	var holds int
	if err := k.DB.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'captured'),
	    count(*) FILTER (WHERE status = 'released'), count(*) FILTER (WHERE status = 'held') FROM holds`).
		Scan(&holds, &rep.HoldsCaptured, &rep.HoldsReleased, &rep.HoldsHeld); err != nil {
		return err
	}
	c.Examined = fmt.Sprintf("%d holds, %d buyers", holds, k.Buyers)
	rows, err := k.DB.Query(ctx, `SELECT j.id::text, format('%s with %s holds (%s, settled %s)', j.status, count(h.job_id),
	        coalesce(string_agg(h.status, ','), 'none'), coalesce(string_agg(h.settled_at::text, ','), 'never'))
	    FROM jobs j LEFT JOIN holds h ON h.job_id = j.id
	    GROUP BY j.id
	    HAVING count(h.job_id) <> 1 OR min(h.status) <> CASE WHEN j.status = 'succeeded' THEN 'captured' ELSE 'released' END
	        OR bool_or(h.settled_at IS NULL)`)
	if err != nil {
		return err
	}
	if err := eachRow(rows, func(id, what string) { c.add("job %s is %s", id, what) }); err != nil {
		return err
	}
	// Settled once: what was captured is exactly the succeeded jobs' holds,
	// and the balance is the initial one less that (nothing held).
	rows, err = k.DB.Query(ctx, `SELECT b.id::text, format('balance %s + captured %s <> initial %s, or captured <> %s captured holds',
	        b.balance_cents, b.captured_cents, b.initial_cents, coalesce(h.captured, 0))
	    FROM buyers b LEFT JOIN (SELECT buyer_id, sum(amount_cents) captured FROM holds WHERE status = 'captured'
	                             GROUP BY buyer_id) h ON h.buyer_id = b.id
	    WHERE b.balance_cents + b.captured_cents <> b.initial_cents OR b.captured_cents <> coalesce(h.captured, 0)`)
	if err != nil {
		return err
	}
	return eachRow(rows, func(id, what string) { c.add("buyer %s: %s", id, what) })
}

// checkWebhooks: every terminal job has its terminal outbox row; a row
// marked delivered was acknowledged by the receiver (else it was lost); a
// row not delivered is recorded for retry (SPEC: at least once, retried);
// the receiver got nothing the outbox does not hold.
func (k *checker) checkWebhooks(rep *Report) func(context.Context, *Check) error {
	return func(ctx context.Context, c *Check) error {
		got, refused, forged, why := k.Hook.snapshot()
		rep.WebhookRefused = refused
		for _, w := range why {
			c.add("receiver: %s", w)
		}
		if forged > len(why) {
			c.add("receiver: %d forged or malformed requests in all", forged)
		}
		rows, err := k.DB.Query(ctx, `SELECT j.id::text, j.status FROM jobs j
		    WHERE j.status IN ('succeeded', 'cancelled', 'failed') AND NOT EXISTS (
		        SELECT 1 FROM webhook_outbox w WHERE w.job_id = j.id AND w.event = j.status)`)
		if err != nil {
			return err
		}
		if err := eachRow(rows, func(id, status string) { c.add("job %s is %s but has no %s webhook", id, status, status) }); err != nil {
			return err
		}
		rows, err = k.DB.Query(ctx, `SELECT w.id, w.job_id::text, j.buyer_id::text, w.event, w.delivered_at IS NOT NULL,
		        coalesce(w.last_error, '')
		    FROM webhook_outbox w JOIN jobs j ON j.id = w.job_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		seen := map[int64]bool{}
		var n int
		for rows.Next() {
			var id int64
			var job, buyer, event, lastErr string
			var delivered bool
			if err := rows.Scan(&id, &job, &buyer, &event, &delivered, &lastErr); err != nil {
				return err
			}
			n++
			seen[id] = true
			g, ok := got[id]
			switch {
			case !delivered:
				rep.WebhookPending++
			case !ok:
				c.add("delivery %d (%s of job %s) is marked delivered (%q) but the receiver never acknowledged it", id, event, job, lastErr)
			case g.job != job || g.event != event || g.buyer != buyer:
				c.add("delivery %d: receiver got %s of job %s for buyer %s, outbox says %s of %s for %s", id, g.event, g.job, g.buyer, event, job, buyer)
			default:
				rep.WebhookDelivered++
				if g.times > 1 {
					rep.WebhookDuplicates += g.times - 1
				}
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for id, g := range got {
			if !seen[id] {
				c.add("receiver acknowledged delivery %d (%s of job %s) that no outbox row holds", id, g.event, g.job)
			}
		}
		c.Examined = fmt.Sprintf("%d outbox rows, %d acknowledged deliveries", n, len(got))
		return nil
	}
}

// checkOutputs re-reads every succeeded job's stored output through the
// artifact store the control plane writes (a second handle on its
// directory or bucket) and hashes every byte: invariant 8 over the bytes served, not
// only the rows (store.CheckOutputs). A store that cannot be read is an
// error of the run, not a violation.
func (k *checker) checkOutputs(rep *Report) func(context.Context, *Check) error {
	return func(ctx context.Context, c *Check) error {
		st := k.Store
		if st == nil {
			fs, err := artifact.NewFS(k.ArtifactDir)
			if err != nil {
				return err
			}
			defer fs.Close()
			st = fs
		}
		vs, err := store.CheckOutputs(ctx, k.DB, st)
		if err != nil {
			return err
		}
		for _, v := range vs {
			c.add("%s", v)
		}
		c.Examined = fmt.Sprintf("%d succeeded outputs", rep.Succeeded)
		return nil
	}
}

func (k *checker) checkExercised(rep *Report) func(context.Context, *Check) error {
	return func(_ context.Context, c *Check) error {
		c.Examined = fmt.Sprintf("%d succeeded, %d faults", rep.Succeeded, rep.Stats.Faults)
		if rep.Succeeded == 0 {
			c.add("no job succeeded: the load did not reach the stack")
		}
		if rep.Stats.Faults == 0 {
			c.add("no fault was injected: run longer or with a shorter --fault-every")
		}
		return nil
	}
}

// eachRow scans (text, text) rows into fn.
func eachRow(rows pgx.Rows, fn func(a, b string)) error {
	defer rows.Close()
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return err
		}
		fn(a, b)
	}
	return rows.Err()
}

// EachRow scans (text, text) rows into fn, for the fleet's own checks.
func EachRow(rows pgx.Rows, fn func(a, b string)) error { return eachRow(rows, fn) }
