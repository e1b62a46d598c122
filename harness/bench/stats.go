package bench

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Operation names of the client-side timings.
const (
	opCreate   = "CreateJob (POST /v1/jobs round trip)"
	opLease    = "Lease (slot free -> lease_offer, peak phase)"
	opProgress = "Progress (progress -> progress_ok)"
	opUpload   = "upload (PUT grant URL)"
	opCommit   = "Commit (commit -> commit_ok: tx1 + verify + tx2)"
)

var opWhat = map[string]string{
	opCreate:   "buyer HTTP request: auth, CreateJob tx with input stored, job view read",
	opLease:    "gateway Lease tx after the agent's slot freed (hello or commit_ok); includes the gateway's scheduling",
	opProgress: "WebSocket round trip of one Progress tx",
	opUpload:   "artifact PUT through the signed grant URL (not a transaction)",
	opCommit:   "WebSocket round trip of Commit: tx1, MP4 verification, tx2",
}

// recorder collects client-side timings by operation.
type recorder struct {
	mu  sync.Mutex
	ops map[string][]time.Duration
}

func (r *recorder) add(op string, d time.Duration) {
	r.mu.Lock()
	if r.ops == nil {
		r.ops = map[string][]time.Duration{}
	}
	r.ops[op] = append(r.ops[op], d)
	r.mu.Unlock()
}

// opStats summarises the client-side timings by operation, slowest p99 first.
func (d *driver) opStats() []OpStats {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	var out []OpStats
	for op, v := range d.rec.ops {
		out = append(out, OpStats{Op: op, Count: len(v), P50ms: ms(quantile(v, 0.5)), P99ms: ms(quantile(v, 0.99)),
			Maxms: ms(quantile(v, 1)), What: opWhat[op]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].P99ms > out[j].P99ms })
	return out
}

// slowest names the slowest transaction: from pg_stat_statements when the
// cluster has it loaded, else the service operation with the highest
// client-side p99 (the artifact upload is not a transaction, and the lease
// gap includes the gateway's scheduling; both are left out).
func (d *driver) slowest(ctx context.Context, ops []OpStats) Slowest {
	var s Slowest
	for _, o := range ops {
		if o.Op == opUpload || o.Op == opLease {
			continue // not a request -> reply round trip of one operation
		}
		s = Slowest{Name: o.Op, P99ms: o.P99ms}
		break
	}
	var query string
	var mean float64
	var err error
	if d.cfg.stmts != nil { // the bench's own cluster: the view is in its admin database
		query, mean, err = d.cfg.stmts.slowestStatement(ctx)
	} else {
		err = d.pool.QueryRow(ctx, sqlSlowest, "").Scan(&query, &mean)
	}
	if err != nil {
		s.Method = "client-side request -> reply round trip of each service operation over all phases, highest p99; " +
			"the lease gap (slot free -> offer) includes gateway scheduling and is listed but not ranked " +
			"(pg_stat_statements unavailable: " + firstLine(err.Error()) + ")"
		return s
	}
	s.Method = fmt.Sprintf("client-side p99; pg_stat_statements' slowest statement by mean is %.2f ms: %s", mean, firstLine(query))
	return s
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// quantile is the q-quantile (nearest rank) of v; 0 for none.
func quantile(v []time.Duration, q float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
