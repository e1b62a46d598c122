package scenarios

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/controlplane"
)

// `rendermac server` on a bucket: the control plane as controlplane.Run
// starts it (the wiring of `rendermac server --artifacts s3://...`), on the
// scenario's database, against a bucket of a stand-in S3 server that
// either honours If-None-Match: * (a second create-only PUT of a key is
// 412 PreconditionFailed) or ignores it (the PUT replaces the object).
// The contract: a server refuses to start on the second kind, since it
// could not keep output keys write-once (docs/semantics.md, "Artifacts on
// S3").

func init() { scCommands["serve"] = cmdServe }

// errServing is what the ready callback returns to stop a control plane
// that started.
var errServing = errors.New("the control plane started and served")

// cmdServe starts a control plane on a stand-in bucket that honours or
// ignores If-None-Match: * and checks that it starts (and is stopped at
// once) or refuses to start, naming the condition.
// Example: serve bucket=ignores-condition -> refused
func cmdServe(r *scRun, st scStep) error {
	kind := st.opt("bucket", "")
	if (kind != "honours-condition" && kind != "ignores-condition") || len(st.arrow) != 1 ||
		(st.arrow[0] != "started" && st.arrow[0] != "refused") {
		return errors.New("want: serve bucket=honours-condition|ignores-condition -> started|refused")
	}
	b := &fakeBucket{honours: kind == "honours-condition", objects: map[string][]byte{}}
	srv := httptest.NewServer(b)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(r.ctx, 2*r.timeout)
	defer cancel()
	err := controlplane.Run(ctx, controlplane.Config{DB: r.dbURL, Listen: "127.0.0.1:0", Artifacts: "s3://scenario-bucket/rm",
		S3:         artifact.S3Config{Endpoint: srv.URL, PathStyle: true, Region: "us-east-1", AccessKey: "scenario", SecretKey: "scenario"},
		SigningKey: scSigningKey, Log: slog.New(slog.DiscardHandler)},
		func(context.Context, *controlplane.Plane) error { return errServing })
	got := "refused"
	if errors.Is(err, errServing) {
		got = "started"
	}
	puts, conditional := b.counts()
	r.tl.add(laneGateway, fmt.Sprintf("rendermac server on a bucket that %s If-None-Match: * (%d PUTs, %d conditional): %s (%v)",
		strings.TrimSuffix(kind, "-condition"), puts, conditional, got, err))
	r.reply("serve " + kind + " -> " + got)
	switch {
	case got != st.arrow[0]:
		return fmt.Errorf("serve on a bucket that %s the condition: want %s, got %s: %v", kind, st.arrow[0], got, err)
	case got == "refused" && !strings.Contains(err.Error(), protocol.OutputPutCondition):
		return fmt.Errorf("serve on a bucket that %s the condition: refused, but not for the condition: %w", kind, err)
	case conditional == 0:
		return fmt.Errorf("serve on a bucket that %s the condition: the server never sent a create-only PUT", kind)
	}
	r.count("serve."+got, 1)
	return nil
}

// fakeBucket is a path-style S3 endpoint of one bucket, enough for
// artifact.S3.Check: HEAD of the bucket, PUT (with or without
// If-None-Match: *) and DELETE of an object. It checks no signature.
type fakeBucket struct {
	honours bool
	mu      sync.Mutex
	objects map[string][]byte
	puts    int
	condPut int
}

func (b *fakeBucket) counts() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.puts, b.condPut
}

func (b *fakeBucket) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, key, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	switch {
	case req.Method == http.MethodHead && key == "":
		w.WriteHeader(http.StatusOK)
	case req.Method == http.MethodPut && key != "":
		b.puts++
		conditional := req.Header.Get(protocol.OutputPutCondition) == protocol.OutputPutCreateOnly
		if conditional {
			b.condPut++
		}
		if _, exists := b.objects[key]; exists && conditional && b.honours {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusPreconditionFailed)
			_, _ = fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>`+
				`<Message>At least one of the pre-conditions you specified did not hold</Message></Error>`)
			return
		}
		b.objects[key] = []byte("stored")
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, time.Now().UnixNano()))
		w.WriteHeader(http.StatusOK)
	case req.Method == http.MethodDelete && key != "":
		delete(b.objects, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotImplemented)
	}
}
