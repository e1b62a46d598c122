//go:build faultpoints

package scenarios

import (
	"context"

	"github.com/rendermac/rendermac/server/faultpoint"
)

// faultpointsBuilt: this binary can arm the server's fault points.
const faultpointsBuilt = true

// fpClear disarms the run's points.
func (r *scRun) fpClear() { r.fp.Clear() }

// fpHits is how often the run's services hit name.
func (r *scRun) fpHits(name string) int64 { return r.fp.Hits(name) }

// fpArm arms name with action in the run's services, at its first hit only
// when once is set.
func (r *scRun) fpArm(name string, action func(ctx context.Context), once bool) {
	a := faultpoint.Inject(action)
	if once {
		a = faultpoint.Once(a)
	}
	r.fp.Set(name, a)
}
