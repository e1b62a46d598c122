package scenarios

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/grant"
)

// Artifact store kinds a run uses, and a step's `store=` option: a step
// with store=fs runs only on the filesystem store, store=s3 only on S3,
// because the two answer a late PUT differently (semantics.md, "Artifacts
// on S3"): the control plane refuses it, the bucket takes it and nothing
// serves it.
const (
	storeFS = "fs"
	storeS3 = "s3"
)

func (r *scRun) storeKind() string {
	if r.env.opts.ArtifactsS3 {
		return storeS3
	}
	return storeFS
}

// applies reports whether st runs on this run's artifact store.
func (r *scRun) applies(st scStep) bool {
	kind := st.opt("store", "")
	return kind == "" || kind == r.storeKind()
}

// s3Run is a run's own S3 server (a versitygw process, so `store down`
// stops exactly this run's store) and the store on a fresh bucket of it.
type s3Run struct {
	srv    *s3provider.Server
	store  *artifact.S3
	http   *http.Client
	bucket string
}

// scS3Prefix is where a run's store keeps its objects in its bucket.
const scS3Prefix = "scenario/"

// openS3 starts the run's versitygw and returns the S3 store on a new bucket.
func openS3(ctx context.Context) (*s3Run, error) {
	srv, err := s3provider.Open(ctx, s3provider.Options{})
	if err != nil {
		return nil, fmt.Errorf("artifacts on S3: %w", err)
	}
	bucket, err := srv.NewBucket(ctx)
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{}}
	st, err := artifact.NewS3(ctx, artifact.S3Config{Bucket: bucket, Prefix: scS3Prefix, Endpoint: srv.Endpoint(), PathStyle: true,
		Region: s3provider.Region, AccessKey: s3provider.AccessKey, SecretKey: s3provider.SecretKey, HTTPClient: hc})
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	return &s3Run{srv: srv, store: st, http: hc, bucket: bucket}, nil
}

func (s *s3Run) close() {
	s.http.CloseIdleConnections()
	_ = s.srv.Close()
}

// plainStore hides a store's Copy, so Verify takes it for a store whose
// writes the control plane fences: it judges and serves the attempt's own
// key. That is the unsealed_outputs variant on S3 (with plainGrants, so
// the bucket takes a second write): a late PUT changes the bytes served.
type plainStore struct{ artifact.Store }

// scSealer is scStore with the S3 store's Copy, so Verify seals through
// the fault-injecting store.
type scSealer struct {
	*scStore
	s3 *artifact.S3
}

// Copy implements artifact.Sealer.
func (s scSealer) Copy(ctx context.Context, src, dst string) (artifact.Object, error) {
	if err := s.fault("copy", src); err != nil {
		return artifact.Object{}, err
	}
	if sealed, ok := strings.CutPrefix(dst, artifact.SealedKey("")); ok {
		s.mu.Lock()
		hook := s.beforeSeal
		s.beforeSeal = nil
		s.mu.Unlock()
		if hook != nil {
			hook(sealed)
		}
	}
	obj, err := s.s3.Copy(ctx, src, dst)
	return obj, s.observe("copy", src, err)
}

// observe counts a real store failure (the S3 process stopped by `store
// down`) like an injected one; a missing object is an answer, not a failure.
func (s *scStore) observe(op, key string, err error) error {
	if err != nil && s.realOutage.Load() && !errors.Is(err, artifact.ErrNotFound) {
		s.r.count("store.errors", 1)
		s.r.tl.add(laneDatabase, fmt.Sprintf("artifact store failed %s %s (S3 server stopped)", op, s.r.keyName(key)))
	}
	return err
}

// served is the artifact store the stacks' services and APIs use, and
// checked is the view of it CheckOutputs reads (past injected faults, as
// the server serves): on S3 the sealing store, unless the variant hides the
// seal.
func (r *scRun) served() artifact.Store {
	if r.s3 == nil || r.store.unsealed {
		return r.store
	}
	return scSealer{scStore: r.store, s3: r.s3.store}
}

func (r *scRun) checked() artifact.Store {
	switch {
	case r.s3 == nil:
		return r.store.raw
	case r.store.unsealed:
		return plainStore{r.s3.store}
	}
	return r.s3.store
}

// grants is what the stacks issue grant URLs with: presigned URLs of the
// run's bucket on S3, else nil (the stack's signer). Under
// unsealed_outputs an output put grant is a plain PUT, not create-only.
func (r *scRun) grants() grant.Issuer {
	switch {
	case r.s3 == nil:
		return nil
	case r.store.unsealed:
		return plainGrants{r.s3.store}
	}
	return r.s3.store
}

// plainGrants is the S3 store's grants with every put grant a plain
// presigned PUT (artifact.S3.Presign): the unsealed_outputs variant on S3,
// where nothing stops a second write of an output key.
type plainGrants struct{ *artifact.S3 }

// Grant implements grant.Issuer.
func (g plainGrants) Grant(ctx context.Context, op grant.Op, key string, now time.Time, ttl time.Duration) (string, error) {
	if op == grant.Put {
		return g.Presign(ctx, true, key, ttl)
	}
	return g.S3.Grant(ctx, op, key, now, ttl)
}

// setS3 stops (down) or starts (up) the run's S3 server process.
func (r *scRun) setS3(up bool) error {
	ctx, cancel := context.WithTimeout(r.ctx, 30e9)
	defer cancel()
	if up {
		r.store.realOutage.Store(false)
		return r.s3.srv.Start(ctx)
	}
	r.store.realOutage.Store(true)
	return r.s3.srv.Stop()
}

// landed reports whether the attempt's key in the bucket holds data now.
func (r *scRun) landed(key string, data []byte) bool {
	rd, _, err := r.s3.store.Open(r.ctx, key)
	if err != nil {
		return false
	}
	defer rd.Close()
	got, err := io.ReadAll(rd)
	return err == nil && bytes.Equal(got, data)
}
