//go:build !docker

package pgprovider

import (
	"context"
	"errors"
)

// Without -tags docker the Docker fallback is not compiled in: the shipped
// binary (make build) must not link testcontainers and the Docker client,
// which agents on Macs and servers never use. make test and make qualify
// build with the tag (Makefile TAGS).
var errNoDockerBuild = errors.New("not compiled in (build with -tags docker, as make test and make qualify do)")

type dockerPG struct{}

func dockerReachable(context.Context) error { return errNoDockerBuild }

func startDocker(context.Context, Options) (*dockerPG, string, error) {
	return nil, "", errNoDockerBuild
}

func (d *dockerPG) close(context.Context) error { return nil }
