package agent

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/clock"
)

// An object store that is briefly unavailable (503, or no connection) does
// not fail the attempt: the agent PUTs the output again within its lease.
// A refusal (507, a full store) is final at once.
func TestUploadRetriesWhileTheStoreIsUnavailable(t *testing.T) {
	var puts, unavailable atomic.Int32
	unavailable.Store(2)
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		puts.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		if unavailable.Add(-1) >= 0 {
			w.WriteHeader(int(status.Load()))
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "output.mp4")
	require.NoError(t, os.WriteFile(out, []byte("bytes"), 0o600))
	a, err := New(Config{ServerURL: srv.URL, DeviceToken: "t", Slots: 1, WorkDir: t.TempDir(),
		Services: []string{runner.ServiceSynthetic}, Runners: runner.Builtin(clock.Real{}, ""), Clock: clock.Real{},
		HTTPClient: srv.Client(), Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)

	status.Store(http.StatusServiceUnavailable)
	require.NoError(t, a.uploadRetrying(context.Background(), srv.URL+"/o.mp4", out, 5))
	require.Equal(t, int32(3), puts.Load(), "two 503s, then the PUT that succeeded")

	puts.Store(0)
	unavailable.Store(1)
	status.Store(http.StatusInsufficientStorage)
	err = a.uploadRetrying(context.Background(), srv.URL+"/o.mp4", out, 5)
	require.Error(t, err)
	require.Equal(t, int32(1), puts.Load(), "a 507 is not retried")

	srv.Close() // no connection at all: every try fails, then the error
	puts.Store(0)
	err = a.uploadRetrying(context.Background(), srv.URL+"/o.mp4", out, 5)
	require.Error(t, err)
	require.Equal(t, int32(0), puts.Load())
}
