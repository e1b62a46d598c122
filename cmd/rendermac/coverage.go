package main

import (
	"flag"
	"strings"

	"github.com/rendermac/rendermac/harness/fuzz"
)

// weightFlag is a repeatable --weight op=N: it sets the op's weight in gen
// and keeps the settings, so that replay commands repeat them.
type weightFlag struct {
	gen   *fuzz.GenConfig
	specs *[]string
}

func (w weightFlag) String() string {
	if w.specs == nil {
		return ""
	}
	return strings.Join(*w.specs, " ")
}

func (w weightFlag) Set(s string) error {
	if err := w.gen.SetWeight(s); err != nil {
		return err
	}
	*w.specs = append(*w.specs, s)
	return nil
}

// addWeightFlag registers --weight on fs.
func addWeightFlag(fs *flag.FlagSet, gen *fuzz.GenConfig, specs *[]string) {
	*gen = fuzz.DefaultGenConfig
	fs.Var(weightFlag{gen: gen, specs: specs}, "weight", "op=N: the generator's weight for op (repeatable; 0 never draws it; ops: "+
		strings.Join(fuzz.OpNames(), ", ")+"; default "+fuzz.DefaultGenConfig.WeightsString()+")")
}
