package model

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

func TestCreateJobBoundariesAccepted(t *testing.T) {
	t.Parallel()
	// Every key must be one the service declares: a synthetic service
	// declaring 32 string params (one with a 32-byte name, each up to the
	// 256 bytes of the generic bound) reaches the generic bounds valid.
	wide := protocol.Services[0]
	long := strings.Repeat("a", 32)
	wide.Params = nil
	for name := range manyParams(31) {
		wide.Params = append(wide.Params, protocol.ParamSpec{Name: name, Type: protocol.ParamString, MaxLen: 256})
	}
	wide.Params = append(wide.Params, protocol.ParamSpec{Name: long, Type: protocol.ParamString, MaxLen: 256},
		protocol.ParamSpec{Name: "seed", Type: protocol.ParamString}) // request's
	slices.SortFunc(wide.Params, func(a, b protocol.ParamSpec) int { return strings.Compare(a.Name, b.Name) })
	b := setup(t, Config{Services: []protocol.Service{wide}})
	for _, mut := range []func(*protocol.CreateJobRequest){
		func(r *protocol.CreateJobRequest) { r.MaxAttempts = 1 },
		func(r *protocol.CreateJobRequest) { r.MaxAttempts = 10 },
		func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second },
		func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 7 * 24 * time.Hour },
		func(r *protocol.CreateJobRequest) { r.Input.Bytes = 0 },
		func(r *protocol.CreateJobRequest) { r.Params = nil },
		func(r *protocol.CreateJobRequest) {
			r.Params = manyParams(31)
			r.Params[long] = strings.Repeat("v", 256)
		},
		func(r *protocol.CreateJobRequest) { r.Params = map[string]string{long: strings.Repeat("v", 256)} },
		func(r *protocol.CreateJobRequest) { r.IdempotencyKey = strings.Repeat("k", 200) },
	} {
		req := request(buyerRich, svcSynthetic)
		mut(&req)
		b.create(req)
	}
}

func manyParams(n int) map[string]string {
	p := make(map[string]string, n)
	for i := range n {
		p["p"+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	return p
}
