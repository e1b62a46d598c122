package targets

import "github.com/rendermac/rendermac/sim"

func simVariant(m string) sim.Variant { return sim.Variant(m) }
