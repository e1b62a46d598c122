//go:build !faultpoints

package scenarios

import "context"

// faultpointsBuilt: without -tags faultpoints the server's fault points are
// compiled out, so the scenarios that arm them do not run (Runnable says so).
const faultpointsBuilt = false

func (r *scRun) fpClear() {}

func (r *scRun) fpHits(string) int64 { return 0 }

func (r *scRun) fpArm(name string, _ func(ctx context.Context), _ bool) {
	panic("scenarios: fault point " + name + " armed in a build without -tags faultpoints")
}
