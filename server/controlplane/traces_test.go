package controlplane_test

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint: it decodes every export
// request's protobuf and keeps the spans with their resource's service name.
type otlpReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	// spans and services are parallel: each span and its service.name.
	spans    []*tracepb.Span
	services []string
	bad      []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &req)
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			rc.bad = append(rc.bad, r.URL.Path+" "+r.Header.Get("Content-Type"))
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		for _, rs := range req.GetResourceSpans() {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					rc.spans = append(rc.spans, sp)
					rc.services = append(rc.services, service)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// find returns the first span (and its service) that match says yes to.
func (rc *otlpReceiver) find(match func(*tracepb.Span) bool) (*tracepb.Span, string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, sp := range rc.spans {
		if match(sp) {
			return sp, rc.services[i]
		}
	}
	return nil, ""
}

func attr(sp *tracepb.Span, key string) string {
	for _, kv := range sp.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// A real `rendermac server` with OTEL_EXPORTER_OTLP_ENDPOINT set exports
// over OTLP/HTTP: the API request's server span, and the database
// statements it ran as its children (same trace, parent = the API span).
func TestServerExportsTracesOverOTLP(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	w := newWorld(t)
	w.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}
	p := w.start(t, "traced", "127.0.0.1:0", "")
	jobID := w.createJob(t, p)

	var api, db *tracepb.Span
	var service string
	deadline := time.Now().Add(waitFor)
	for db == nil {
		api, service = rc.find(func(sp *tracepb.Span) bool {
			return sp.GetName() == "POST /v1/jobs" && sp.GetKind() == tracepb.Span_SPAN_KIND_SERVER
		})
		if api != nil {
			db, _ = rc.find(func(sp *tracepb.Span) bool {
				return bytes.Equal(sp.GetParentSpanId(), api.GetSpanId()) && attr(sp, "db.system.name") == "postgresql"
			})
		}
		if time.Now().After(deadline) {
			rc.mu.Lock()
			n := len(rc.spans)
			rc.mu.Unlock()
			t.Fatalf("no API span with a database child within %v (api span %v; %d spans received)", waitFor, api != nil, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, "rendermac", service)
	require.Equal(t, api.GetTraceId(), db.GetTraceId(), "one trace")
	require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, db.GetKind())
	require.NotEmpty(t, attr(db, "db.query.text"))
	t.Logf("job %s: api span %s %q, db span %s %q (%s)", jobID, hex.EncodeToString(api.GetSpanId()), api.GetName(),
		hex.EncodeToString(db.GetSpanId()), db.GetName(), attr(db, "db.query.text"))
	// The device session route is not traced, and the background loops'
	// statements make no root spans.
	orphan, _ := rc.find(func(sp *tracepb.Span) bool {
		return len(sp.GetParentSpanId()) == 0 && attr(sp, "db.system.name") != ""
	})
	require.Nil(t, orphan, "a database span without a parent")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Empty(t, rc.bad)
}
