package targets

import "github.com/rendermac/rendermac/sim"

func simMutation(m string) sim.Mutation { return sim.Mutation(m) }
