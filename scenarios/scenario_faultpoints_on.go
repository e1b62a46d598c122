//go:build faultpoints

package scenarios

import (
	"context"

	"github.com/rendermac/rendermac/server/faultpoint"
)

// faultpointsBuilt: this binary can arm the server's fault points.
const faultpointsBuilt = true

func fpClear() { faultpoint.Clear() }

func fpHits(name string) int64 { return faultpoint.Hits(name) }

// fpArm arms name with action, at its first hit only when once is set.
func fpArm(name string, action func(ctx context.Context), once bool) {
	a := faultpoint.Inject(action)
	if once {
		a = faultpoint.Once(a)
	}
	faultpoint.Set(name, a)
}
