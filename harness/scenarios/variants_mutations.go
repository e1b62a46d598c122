//go:build mutations

package scenarios

import "github.com/rendermac/rendermac/server/gateway"

// variantsBuilt: this binary has the server's and the gateway's broken
// variants.
const variantsBuilt = true

// The broken gateways are harness variants only in a build with
// -tags mutations.
func init() {
	harnessVariants[string(gateway.VariantAckProgressOnError)] = "the gateway answers progress_ok when the service call failed"
	harnessVariants[string(gateway.VariantReleaseBeforeReply)] = "the gateway frees the slot (and offers) before writing the commit decision"
	harnessVariants[string(gateway.VariantSessionFenced)] = "the gateway fences progress by the session an attempt was offered on"
	harnessVariants[string(gateway.VariantHeartbeatRejected)] = "the gateway heartbeats a device on a rejected frame"
}
