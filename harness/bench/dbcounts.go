package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/gateway"
)

// HappyPathOps are the dbstat operations of one job's happy path on the
// device side: lease, progress, commit (both
// transactions and verification's read) and the gateway's liveness touch.
var HappyPathOps = []string{fencing.OpLease, fencing.OpProgress, gateway.OpTouch,
	fencing.OpCommitBegin, fencing.OpVerifyRead, fencing.OpCommitFinish}

// alsoPerJob are operations that also run once per job but are not the
// device's lease -> progress -> commit path the goal counts: the output
// upload's seal check and the API's read of the database clock for its
// grant (an HTTP PUT), and the buyer's webhook.
var alsoPerJob = map[string]bool{fencing.OpUpload: true, "api_clock": true, "webhook": true}

// DBResult is the server's database work during the peak phase, read from
// its /metrics before and after (rendermac_db_* counters, dbstat).
type DBResult struct {
	// Jobs is how many jobs were committed in the window; Offers how many
	// lease offers the agents received (leases beyond them answered no_job:
	// each agent's last lease once the queue ran dry).
	Jobs   int `json:"jobs"`
	Offers int `json:"offers"`
	// ByOp is each operation's work in the window.
	ByOp  map[string]dbstat.Counts `json:"by_op"`
	Error string                   `json:"error,omitempty"`
}

// NoJobLeases is how many Lease transactions made no offer: each answered
// no_job (the bench's agents are never full, never revoked) as the queue
// ran dry, begun before the first of them told the gateway it was empty.
func (r DBResult) NoJobLeases() int64 {
	return max(0, r.ByOp[fencing.OpLease].Transactions-int64(r.Offers))
}

// HappyPath sums the happy-path operations.
func (r DBResult) HappyPath() dbstat.Counts {
	var c dbstat.Counts
	for _, op := range HappyPathOps {
		c = c.Add(r.ByOp[op])
	}
	return c
}

// scrapeDB reads the rendermac_db_* counters from the /metrics at baseURL,
// sending token as its bearer token when set.
func scrapeDB(ctx context.Context, httpc *http.Client, baseURL, token string) (map[string]dbstat.Counts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET /metrics: HTTP %d: %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	out := map[string]dbstat.Counts{}
	for name, fam := range fams {
		if !strings.HasPrefix(name, "rendermac_db_") {
			continue
		}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := int64(m.GetCounter().GetValue())
			c := out[labels["op"]]
			switch name {
			case "rendermac_db_transactions_total":
				c.Transactions = v
			case "rendermac_db_round_trips_total":
				c.RoundTrips = v
			case "rendermac_db_statements_total":
				if labels["where"] == "in_tx" {
					c.InTx = v
				} else {
					c.Outside = v
				}
			}
			out[labels["op"]] = c
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("GET /metrics: no rendermac_db_* counters (a server older than this bench?)")
	}
	return out, nil
}

// diffCounts is after - before, by operation, leaving out operations
// without work in between.
func diffCounts(before, after map[string]dbstat.Counts) map[string]dbstat.Counts {
	out := map[string]dbstat.Counts{}
	for op, a := range after {
		if d := a.Sub(before[op]); d != (dbstat.Counts{}) {
			out[op] = d
		}
	}
	return out
}
