package scenarios

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/gateway"
)

// A variant is a deliberately broken stack a scenario must fail against,
// proving its checks are not vacuous (STYLE: every property is paired with a
// broken variant). Server variants remove one fence inside the service
// layer; harness variants break the stack from outside server/, through
// what the harness wires: the service's configuration, the artifact store,
// the gateway's loops.

// Harness variants.
const (
	// VariantLeaseTTLMismatch makes the service enforce a lease (and
	// verification deadline) ten times the TTL the gateway announces to
	// agents and the harness assumes: a lease that should have expired has
	// not, and the sweeper finds nothing to do.
	VariantLeaseTTLMismatch = "lease_ttl_mismatch"
	// VariantNoMediaCheck configures the catalogue's synthetic.mp4 without
	// its MP4 media check: a broken file with an honest size and digest
	// passes verification.
	VariantNoMediaCheck = "no_media_check"
	// VariantStoreBitflip is an artifact store that returns every object
	// with one byte flipped, so no output verifies.
	VariantStoreBitflip = "store_bitflip"
	// VariantNoListen runs the gateways without their LISTEN/NOTIFY loop:
	// a cancel committed elsewhere never reaches the device's gateway.
	VariantNoListen = "no_listen"
	// VariantStoreDropsWhenFull is an artifact store whose full disk
	// acknowledges uploads it did not store.
	VariantStoreDropsWhenFull = "store_drops_when_full"
	// VariantUnsealedOutputs publishes every upload whatever the attempt's
	// state: a PUT after the claim replaces the committed output.
	VariantUnsealedOutputs = "unsealed_outputs"
	// VariantNoPoolRecheck opens the gateways' pools without the health
	// check after a connection death (store.PoolConfig): idle connections
	// killed by the same cut are handed out unchecked.
	VariantNoPoolRecheck = "no_pool_recheck"
)

// harnessVariants describes each harness variant.
var harnessVariants = map[string]string{
	VariantLeaseTTLMismatch:   "the service enforces 10x the lease TTL the gateway announces",
	VariantNoMediaCheck:       "synthetic.mp4 is configured without its MP4 media check",
	VariantStoreBitflip:       "the artifact store flips one byte of every object it returns",
	VariantNoListen:           "the gateways run without their LISTEN/NOTIFY loop",
	VariantStoreDropsWhenFull: "the artifact store's full disk acknowledges uploads it did not store",
	VariantUnsealedOutputs:    "uploads are published after the attempt's claim: a late PUT replaces the committed output",
	VariantNoPoolRecheck:      "the gateways' pools hand out idle connections unchecked after a connection died",
	// the broken gateways: variants_mutations.go, -tags mutations only
}

// gatewayVariant is the gateway.Config variant a harness variant names
// (gateway.VariantNone for every other variant).
func gatewayVariant(variant string) gateway.Variant {
	if m := gateway.Variant(variant); slices.Contains(gateway.Variants(), m) {
		return m
	}
	return gateway.VariantNone
}

// serverVariants are the service layer's broken variants, as listed by
// ServerVariants (postgres.go): a variant added there is one here.
var serverVariants = targets.ServerVariants()

// VariantNames lists every variant: server variants, then harness variants.
func VariantNames() []string {
	var out []string
	for _, m := range serverVariants {
		out = append(out, string(m))
	}
	var h []string
	for k := range harnessVariants {
		h = append(h, k)
	}
	slices.Sort(h)
	return append(out, h...)
}

// harnessOnly reports whether name could only be a harness variant: a
// broken variant's name is snake_case, so anything else is a typo even in
// a build without the variants.
func harnessOnly(name string) bool {
	return strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != ""
}

// KnownVariant reports whether name is a server or harness variant.
func KnownVariant(name string) bool { return slices.Contains(VariantNames(), name) }

// DescribeVariant says what a variant breaks.
func DescribeVariant(name string) string {
	if d, ok := harnessVariants[name]; ok {
		return d
	}
	if slices.Contains(serverVariants, fencing.Variant(name)) {
		return "server variant " + name
	}
	return ""
}

// VariantOptions returns the EnvOptions that run the named variant ("" is
// the correct stack).
func VariantOptions(name string) (EnvOptions, error) {
	switch {
	case name == "":
		return EnvOptions{}, nil
	case slices.Contains(serverVariants, fencing.Variant(name)):
		return EnvOptions{ServerVariant: fencing.Variant(name)}, nil
	case harnessVariants[name] != "":
		return EnvOptions{HarnessVariant: name}, nil
	}
	if len(serverVariants) == 0 {
		return EnvOptions{}, fmt.Errorf("unknown variant %q (known: %v): %w", name, VariantNames(), fencing.ErrNoVariants)
	}
	return EnvOptions{}, fmt.Errorf("unknown variant %q (known: %v)", name, VariantNames())
}
