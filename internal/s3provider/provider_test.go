package s3provider

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := Shutdown(); err != nil && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// TestStopStartKeepsAddressAndObjects: an outage is a stopped process;
// after Start the same endpoint serves the same buckets.
func TestStopStartKeepsAddressAndObjects(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	name, err := s.NewBucket(ctx)
	require.NoError(t, err)
	c := s.client(http.DefaultClient)
	endpoint := s.Endpoint()

	require.NoError(t, s.Stop())
	_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &name})
	require.Error(t, err, "a stopped server must refuse requests")

	require.NoError(t, s.Start(ctx))
	require.Equal(t, endpoint, s.Endpoint())
	_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &name})
	require.NoError(t, err, "the bucket survives the restart")
}

// TestMissingBinaryExplainsTheInstall: no binary is an error naming the
// install command, never a skip.
func TestMissingBinaryExplainsTheInstall(t *testing.T) {
	_, err := Open(context.Background(), Options{Bin: filepath.Join(t.TempDir(), "versitygw")})
	require.True(t, errors.Is(err, ErrNoVersityGW), "%v", err)
	t.Setenv("VERSITYGW", "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GOBIN", "")
	t.Setenv("HOME", t.TempDir())
	_, err = findBin("") // PATH is empty, so `go env` cannot run either
	require.ErrorIs(t, err, ErrNoVersityGW)
	require.ErrorContains(t, err, InstallCommand)
}
