//go:build docker

package pgprovider

import (
	"context"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"
)

// dockerPG is a postgres container. It is not fault-controllable: a
// container restart gets a new host port, which would break the "URLs keep
// working" promise that Start makes for the local cluster.
type dockerPG struct {
	ctr *testcontainers.DockerContainer
}

const dockerProbeTimeout = 3 * time.Second

// dockerReachable asks the engine for /info with a short timeout. The
// probe runs in a goroutine because testcontainers resolves the Docker host
// with context.Background(); if the engine hangs, that goroutine is left
// behind, which is acceptable on a path that ends in an error anyway.
func dockerReachable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(tclog.NewNoopLogger()))
		if err != nil {
			done <- err
			return
		}
		done <- p.Health(ctx) // Health closes p
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %s", dockerProbeTimeout)
	}
}

func startDocker(ctx context.Context, opts Options) (*dockerPG, string, error) {
	image := opts.DockerImage
	if image == "" {
		image = "postgres:15"
	}
	fsync := "off"
	if opts.Fsync {
		fsync = "on"
	}
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		testcontainers.WithEnv(map[string]string{
			"POSTGRES_PASSWORD": "postgres",
			"POSTGRES_USER":     "postgres",
			"POSTGRES_DB":       "postgres",
		}),
		testcontainers.WithExposedPorts("5432/tcp"),
		testcontainers.WithCmd("postgres", "-c", "fsync="+fsync,
			"-c", "max_connections=200", "-c", "shared_buffers=32MB"),
		// The entrypoint starts postgres twice (init, then for real), so
		// the ready line must be seen twice.
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			wait.ForListeningPort("5432/tcp")),
	)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.Background())
		}
		return nil, "", fmt.Errorf("start %s: %w", image, err)
	}
	hostPort, err := ctr.PortEndpoint(ctx, "5432/tcp", "")
	if err != nil {
		_ = ctr.Terminate(context.Background())
		return nil, "", fmt.Errorf("mapped port: %w", err)
	}
	url := "postgres://postgres:postgres@" + hostPort + "/postgres?sslmode=disable"
	if err := ping(ctx, url); err != nil {
		_ = ctr.Terminate(context.Background())
		return nil, "", fmt.Errorf("container started but %s is unusable: %w", hostPort, err)
	}
	return &dockerPG{ctr: ctr}, url, nil
}

func (d *dockerPG) close(ctx context.Context) error {
	return d.ctr.Terminate(ctx)
}
