package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
)

// lease leases the oldest queued job on the test device.
func (b *bundle) lease(t *testing.T) protocol.Reply {
	t.Helper()
	r, err := b.svc.Lease(context.Background(), b.clock(), deviceID)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeLeaseOffer, r.Code, "%+v", r)
	return r
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queued := b.newJob(t)
	r := b.do(t, http.MethodPost, "/v1/jobs/"+queued+"/cancel", b.key, nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	require.Equal(t, "cancelled", r.json(t)["status"])
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+queued+"/cancel", b.key, nil), http.StatusConflict, "job_terminal")

	active := b.newJob(t)
	offer := b.lease(t)
	require.Equal(t, active, offer.JobID)
	r = b.do(t, http.MethodPost, "/v1/jobs/"+active+"/cancel", b.key, nil)
	require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
	require.Equal(t, "cancelling", r.json(t)["status"])
	// Idempotent while the device winds down.
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/v1/jobs/"+active+"/cancel", b.key, nil).Status)
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+missingID+"/cancel", b.key, nil), http.StatusNotFound, "not_found")
}

func TestEventsAreTheJournal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.newJob(t)
	b.lease(t)
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/cancel", b.key, nil).Status)
	r := b.do(t, http.MethodGet, "/v1/jobs/"+id+"/events", b.key, nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	var got []string
	for _, e := range r.json(t)["events"].([]any) {
		ev := e.(map[string]any)
		from, _ := ev["from_status"].(string)
		got = append(got, ev["kind"].(string)+":"+from+">"+ev["to_status"].(string)+"/"+ev["actor"].(string))
	}
	require.Equal(t, []string{"job:>queued/buyer", "attempt:>leased/matcher", "job:queued>active/matcher",
		"job:active>cancelling/buyer"}, got)
}

// TestSucceededJobShowsOutputAndDownloads drives a job to succeeded through
// the service layer and checks what the buyer sees: attempts without any
// token material, and an output whose download_url opens exactly it.
func TestSucceededJobShowsOutputAndDownloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.newJob(t)
	offer := b.lease(t)
	ctx := context.Background()
	_, err := b.svc.Progress(ctx, b.clock(), deviceID, protocol.Progress{JobID: id, AttemptID: offer.AttemptID,
		LeaseEpoch: 1, Phase: protocol.AttemptUploading})
	require.NoError(t, err)
	content := mp4.Synthetic(mp4.SyntheticParams{Seed: offer.AttemptID})
	key := protocol.OutputKey(id, offer.AttemptID)
	_, err = b.store.Put(ctx, key, bytes.NewReader(content))
	require.NoError(t, err)
	sum := sha256.Sum256(content)
	reply, err := b.svc.Commit(ctx, b.clock(), deviceID, protocol.Commit{JobID: id, AttemptID: offer.AttemptID,
		LeaseEpoch: 1, CommitToken: offer.CommitToken,
		Output: protocol.Output{Key: key, Bytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}})
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitOK, reply.Code, "%+v", reply)

	r := b.do(t, http.MethodGet, "/v1/jobs/"+id, b.key, nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.NotContains(t, string(r.Body), offer.CommitToken)
	require.NotContains(t, string(r.Body), protocol.HashCommitToken(offer.CommitToken))
	job := r.json(t)
	require.Equal(t, "succeeded", job["status"])
	attempts := job["attempts"].([]any)
	require.Len(t, attempts, 1)
	at := attempts[0].(map[string]any)
	require.Equal(t, offer.AttemptID, at["id"])
	require.Equal(t, "succeeded", at["status"])
	require.Equal(t, deviceID, at["device_id"])
	require.EqualValues(t, 1, at["number"])
	require.EqualValues(t, 1, at["epoch"])
	require.NotEmpty(t, at["lease_expires_at"])
	out := job["output"].(map[string]any)
	require.Equal(t, key, out["key"])
	require.EqualValues(t, len(content), out["bytes"])
	require.Equal(t, hex.EncodeToString(sum[:]), out["sha256"])

	u, err := url.Parse(out["download_url"].(string))
	require.NoError(t, err)
	require.Equal(t, "/v1/artifacts/"+key, u.Path)
	got := b.do(t, http.MethodGet, u.Path+"?"+u.RawQuery, "", nil)
	require.Equal(t, http.StatusOK, got.Status, "body: %s", got.Body)
	require.Equal(t, content, got.Body)
	ranged := b.do(t, http.MethodGet, u.Path+"?"+u.RawQuery, "", nil, "Range", "bytes=0-3")
	require.Equal(t, http.StatusPartialContent, ranged.Status)
	require.Equal(t, content[:4], ranged.Body)

	// The download grant is good for DownloadTTL and no longer.
	b.advance(16 * time.Minute)
	requireError(t, b.do(t, http.MethodGet, u.Path+"?"+u.RawQuery, "", nil), http.StatusForbidden, "grant_expired")
	require.True(t, strings.HasPrefix(out["download_url"].(string), "http://rendermac.test/v1/artifacts/"))
}
