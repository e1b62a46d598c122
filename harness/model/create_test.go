package model

import (
	"strings"
	"testing"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

func TestCreateJobBoundariesAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, mut := range []func(*protocol.CreateJobRequest){
		func(r *protocol.CreateJobRequest) { r.MaxAttempts = 1 },
		func(r *protocol.CreateJobRequest) { r.MaxAttempts = 10 },
		func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second },
		func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 7 * 24 * time.Hour },
		func(r *protocol.CreateJobRequest) { r.Input.Bytes = 0 },
		func(r *protocol.CreateJobRequest) { r.Params = nil },
		func(r *protocol.CreateJobRequest) { r.Params = manyParams(32) },
		func(r *protocol.CreateJobRequest) {
			r.Params = map[string]string{strings.Repeat("a", 32): strings.Repeat("v", 256)}
		},
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
