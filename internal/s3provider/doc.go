// Package s3provider hands out a real S3-compatible server to tests, the
// fault harness and the CLI: versitygw (Apache-2.0, Go) in its posix mode,
// serving buckets as directories of a temp dir. No mock: the artifact
// store's S3 backend is tested against the same HTTP API the cloud serves.
//
// # Where the server comes from
//
// [Open] looks for the versitygw binary in Options.Bin, the VERSITYGW
// environment variable, PATH, $GOBIN and $(go env GOPATH)/bin, in that
// order. If none is found it fails with [ErrNoVersityGW] and the command
// that installs it (`go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`,
// which .ci/setup runs). Tests then fail; they never skip, because a
// silently skipped storage test is a test that lies.
//
// # Guarantees
//
//   - Isolation: [Server.NewBucket] creates a fresh bucket per caller.
//   - Stable address: [Server.Stop] and [Server.Start] reuse the same port
//     and directory, so presigned URLs and endpoints handed out before an
//     outage work again after it, and stored objects survive it.
//   - No orphans: the process gets a parent-death signal on Linux and its
//     own process group; [Server.Close] stops it and removes the directory.
package s3provider
