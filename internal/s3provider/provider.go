package s3provider

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rendermac/rendermac/internal/localserver"
)

// Credentials and region every server this package starts accepts.
const (
	AccessKey = "rendermac-test-access"
	SecretKey = "rendermac-test-secret-key-0123456789"
	Region    = "us-east-1"
)

// InstallCommand installs the binary Open looks for.
const InstallCommand = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// ErrNoVersityGW is wrapped by Open's error when no versitygw binary is found.
var ErrNoVersityGW = errors.New("s3provider: no versitygw binary")

// Options tune Open. The zero value is what tests want.
type Options struct {
	// Bin forces the versitygw binary.
	Bin string
	// BaseDir is where the server's temp dir is created (default os.TempDir()).
	BaseDir string
	// StartTimeout bounds each start (default 30s).
	StartTimeout time.Duration
}

// Server is one versitygw process serving a directory on a fixed local port.
// It is safe for concurrent use.
type Server struct {
	bin, dir string
	port     int
	timeout  time.Duration

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	closed bool
}

// Open finds versitygw and starts it on a free port over a fresh directory.
func Open(ctx context.Context, opts Options) (*Server, error) {
	bin, err := findBin(opts.Bin)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.BaseDir, "rendermac-s3-")
	if err != nil {
		return nil, fmt.Errorf("s3provider: %w", err)
	}
	port, err := localserver.FreePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("s3provider: pick a port: %w", err)
	}
	s := &Server{bin: bin, dir: dir, port: port, timeout: opts.StartTimeout}
	if s.timeout == 0 {
		s.timeout = 30 * time.Second
	}
	if err := s.Start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Find returns the versitygw binary Open would start, or an error wrapping
// ErrNoVersityGW that says where it looked and how to install one.
func Find() (string, error) { return findBin("") }

// findBin returns the first versitygw binary it finds, or ErrNoVersityGW
// with the places it looked and how to install one.
func findBin(explicit string) (string, error) {
	return localserver.FindBin(localserver.Binary{Name: "versitygw", Env: "VERSITYGW", Install: InstallCommand, NotFound: ErrNoVersityGW}, explicit)
}

// Endpoint is the server's base URL (path-style addressing).
func (s *Server) Endpoint() string { return "http://" + s.addr() }

func (s *Server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the server (again, after Stop) on the same port and
// directory, and returns once it answers S3 requests.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("s3provider: server is closed")
	case s.cmd != nil:
		return nil
	}
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("s3provider: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "versitygw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("s3provider: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region,
		"--port", s.addr(), "posix", data)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("s3provider: start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	if err := s.waitReady(ctx, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("s3provider: versitygw did not come up on %s: %w; its log: %s", s.addr(), err, s.logTail())
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c := s.client(&http.Client{Timeout: time.Second})
	for {
		_, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("the process exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) logTail() string { return localserver.LogTail(filepath.Join(s.dir, "versitygw.log")) }

// Stop stops the server process (SIGTERM, then SIGKILL after 5s); objects
// stay in the directory for the next Start. Requests meanwhile fail with
// connection refused: an outage of the object store.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd, s.exited = nil, nil
	return nil
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	err := s.Stop()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

func (s *Server) client(hc *http.Client) *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint()),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		HTTPClient:   hc,
	})
}

// NewBucket creates a bucket with a fresh name and returns the name.
func (s *Server) NewBucket(ctx context.Context) (string, error) {
	name := "rm-" + strings.ToLower(rand.Text())
	if _, err := s.client(http.DefaultClient).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		return "", fmt.Errorf("s3provider: create bucket: %w", err)
	}
	return name, nil
}
