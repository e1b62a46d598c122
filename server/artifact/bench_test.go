package artifact

import (
	"bytes"
	"context"
	"testing"
)

// BenchmarkFSPutVerify is one job's artifact work on the file store, as
// the control plane does it: an object written (the input at create, the
// output at upload) and read back to be verified (commit). Its B/op is
// what each job hands the garbage collector (copyPooled).
func BenchmarkFSPutVerify(b *testing.B) {
	store, err := NewFSUnsynced(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	content := bytes.Repeat([]byte("render"), 1000)
	sum := hexSHA256(content)
	key := OutputKey("job", "attempt")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.Put(ctx, key, bytes.NewReader(content)); err != nil {
			b.Fatal(err)
		}
		if err := Verify(ctx, store, key, int64(len(content)), sum, MediaNone); err != nil {
			b.Fatal(err)
		}
	}
}
