package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/server/artifact"
)

// The artifact stores a fleet run can give its gateways (Config.Store).
const (
	// StoreAuto is S3 when a versitygw binary is found, else the
	// filesystem store (and no object-store outage), said on the report.
	StoreAuto = "auto"
	// StoreFS is one directory every gateway writes.
	StoreFS = "fs"
	// StoreS3 is a bucket of one real S3 server (a versitygw process the
	// run starts, stops for the outage fault and restarts), shared by every
	// gateway; agents upload with presigned URLs straight to it.
	StoreS3 = "s3"
)

// Stores lists Config.Store's values.
func Stores() []string { return []string{StoreAuto, StoreFS, StoreS3} }

// s3Prefix is where the fleet's objects live in its bucket.
const s3Prefix = "fleet"

// openStore resolves Config.Store and starts the S3 server it asks for.
func (r *run) openStore(ctx context.Context) error {
	switch r.cfg.Store {
	case StoreFS:
		r.store = StoreFS
		return os.MkdirAll(r.arts, 0o700)
	case StoreS3, StoreAuto:
	default:
		return fmt.Errorf("fleet: store %q: want one of %v", r.cfg.Store, Stores())
	}
	s, err := s3provider.Open(ctx, s3provider.Options{BaseDir: r.dir})
	switch {
	case errors.Is(err, s3provider.ErrNoVersityGW) && r.cfg.Store == StoreAuto:
		r.store = StoreFS
		r.storeNote = "no versitygw: filesystem store, no object-store outage (install it with `" + s3provider.InstallCommand + "`)"
		fmt.Fprintf(r.cfg.Log, "fleet: %s\n", r.storeNote)
		return os.MkdirAll(r.arts, 0o700)
	case errors.Is(err, s3provider.ErrNoVersityGW) && !strings.Contains(err.Error(), s3provider.InstallCommand):
		return fmt.Errorf("fleet --store s3: %w; install it with `%s`", err, s3provider.InstallCommand)
	case err != nil:
		return fmt.Errorf("fleet --store s3: %w", err)
	}
	r.s3 = s
	if r.bucket, err = s.NewBucket(ctx); err != nil {
		return err
	}
	r.store = StoreS3
	return nil
}

// gatewayStore is the server flags and environment that point a gateway at
// the run's store.
func (r *run) gatewayStore() (args, env []string) {
	if r.s3 == nil {
		return []string{"--artifacts", r.arts}, nil
	}
	return []string{"--artifacts", "s3://" + r.bucket + "/" + s3Prefix, "--s3-endpoint", r.s3.Endpoint(), "--s3-path-style"},
		[]string{"AWS_ACCESS_KEY_ID=" + s3provider.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3provider.SecretKey,
			"AWS_REGION=" + s3provider.Region}
}

// checkStore is a second handle on the gateways' store for the end-of-run
// checks (nil: the soak's checks open the directory themselves).
func (r *run) checkStore(ctx context.Context) (artifact.Store, error) {
	if r.s3 == nil {
		return nil, nil
	}
	return artifact.NewS3(ctx, artifact.S3Config{Bucket: r.bucket, Prefix: s3Prefix + "/", Endpoint: r.s3.Endpoint(),
		PathStyle: true, Region: s3provider.Region, AccessKey: s3provider.AccessKey, SecretKey: s3provider.SecretKey})
}

// storeOutage stops the S3 server for d, then starts it again (same port,
// same objects): every gateway's verification and every agent's presigned
// upload meanwhile meets a refused connection.
func (r *run) storeOutage(ctx context.Context, d time.Duration) error {
	if err := r.s3.Stop(); err != nil {
		return err
	}
	time.Sleep(d)
	return r.s3.Start(ctx)
}
