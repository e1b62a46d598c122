package fleet

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rendermac/rendermac/internal/s3provider"
)

// Without versitygw, --store s3 is an error that says how to install it;
// --store auto falls back to the filesystem store and says so.
func TestStoreWithoutVersityGW(t *testing.T) {
	t.Setenv("VERSITYGW", filepath.Join(t.TempDir(), "no-versitygw-here"))
	r := &run{cfg: Config{Store: StoreS3, Log: io.Discard}, dir: t.TempDir()}
	r.arts = filepath.Join(r.dir, "artifacts")
	err := r.openStore(context.Background())
	if err == nil || !strings.Contains(err.Error(), s3provider.InstallCommand) {
		t.Fatalf("--store s3 without versitygw: got %v, want an error naming %q", err, s3provider.InstallCommand)
	}
	r.cfg.Store = StoreAuto
	if err := r.openStore(context.Background()); err != nil {
		t.Fatalf("--store auto without versitygw: %v", err)
	}
	if r.store != StoreFS || r.s3 != nil || !strings.Contains(r.storeNote, s3provider.InstallCommand) {
		t.Fatalf("--store auto without versitygw: store %q, note %q; want fs and a note naming the install command", r.store, r.storeNote)
	}
	r.cfg.Store = "nfs"
	if err := r.openStore(context.Background()); err == nil {
		t.Fatal("--store nfs was accepted")
	}
}
