package fuzz

import (
	"embed"

	"github.com/rendermac/rendermac/internal/provenance"
)

// GeneratorRulesVersion is bumped by hand whenever the generator draws a
// seed's events differently (weights, event kinds, perturbations), so that
// a seed from an older card means another sequence. GeneratorVersion adds a
// hash of the package's sources.
// 2: the upload event; 3: params Postgres cannot store; 4: re-weighted toward
// live attempts (job indexes resolve live-first, NextJob 1/4, more creates
// and leases, fewer ticks); 5: boundary ticks (onto a lease expiry, an
// admission deadline or a heartbeat deadline, or a microsecond either side);
// 6: the withdraw event (the gateway taking back an undelivered offer);
// 7: a create's param is one its service declares (undeclared keys are
// refused since issue 49); 8: pause and resume events (an operator pausing
// a service, issue 51).
const GeneratorRulesVersion = 8

//go:embed *.go
var sources embed.FS

// GeneratorVersion names the generator of this build, e.g. "1+9e0c4d2a7b11".
func GeneratorVersion() string { return provenance.SourceVersion(GeneratorRulesVersion, sources) }
