package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// A refused output's reason is in the job's view, on its attempt.
func TestJobViewShowsTheVerificationVerdict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.newJob(t)
	offer := b.lease(t)
	_, err := b.svc.Progress(ctx, b.clock(), deviceID, protocol.Progress{JobID: id, AttemptID: offer.AttemptID,
		LeaseEpoch: 1, Phase: protocol.AttemptUploading})
	require.NoError(t, err)
	key := protocol.OutputKey(id, offer.AttemptID)
	content := []byte("not an iso-bmff file")
	_, err = b.store.Put(ctx, key, strings.NewReader(string(content)))
	require.NoError(t, err)
	sum := sha256.Sum256(content)
	r, err := b.svc.Commit(ctx, b.clock(), deviceID, protocol.Commit{JobID: id, AttemptID: offer.AttemptID, LeaseEpoch: 1,
		CommitToken: offer.CommitToken, Output: protocol.Output{Key: key, Bytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}})
	require.NoError(t, err)
	require.Equal(t, protocol.CodeVerificationFailed, r.Code)

	got := b.do(t, http.MethodGet, "/v1/jobs/"+id, b.key, nil)
	require.Equal(t, http.StatusOK, got.Status, "%s", got.Body)
	attempts := got.json(t)["attempts"].([]any)
	require.Len(t, attempts, 1)
	a := attempts[0].(map[string]any)
	require.Equal(t, r.Message, a["verify_message"])
	require.True(t, strings.HasPrefix(r.Message, "media_invalid: mp4: "), r.Message)
	require.NotContains(t, a, "encoder", "no ffprobe ran: no encoder is claimed")
}
