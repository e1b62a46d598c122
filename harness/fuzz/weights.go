package fuzz

import (
	"fmt"
	"strconv"
	"strings"
)

// maxWeight bounds one op's weight, so that a typo (commit=10000) is an
// error rather than a campaign of nothing else.
const maxWeight = 1000

// OpNames lists the generator's operations, the names --weight takes.
func OpNames() []string { return append([]string(nil), opNames[:]...) }

// ParseOp returns the op named name.
func ParseOp(name string) (Op, error) {
	for i, n := range opNames {
		if n == name {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("unknown op %q (want one of %s)", name, strings.Join(opNames[:], ", "))
}

// SetWeight applies one "op=N" setting: the op's weight in the draw of
// event kinds, 0 to never draw it, at most 1000.
func (c *GenConfig) SetWeight(spec string) error {
	name, val, ok := strings.Cut(spec, "=")
	if !ok {
		return fmt.Errorf("weight %q: want op=N, e.g. commit=20", spec)
	}
	op, err := ParseOp(strings.TrimSpace(name))
	if err != nil {
		return fmt.Errorf("weight %q: %w", spec, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(val))
	if err != nil || n < 0 || n > maxWeight {
		return fmt.Errorf("weight %q: N must be an integer from 0 to %d", spec, maxWeight)
	}
	c.Weights[op] = n
	return nil
}

// Validate reports a config that cannot draw: every weight zero.
func (c GenConfig) Validate() error {
	for _, w := range c.Weights {
		if w > 0 {
			return nil
		}
	}
	return fmt.Errorf("every op weight is 0: the generator cannot draw an event")
}

// WeightsString renders every op's weight in op order, "create=8 lease=12 ...",
// as cards and replay files record it; ParseWeights reads it back.
func (c GenConfig) WeightsString() string {
	parts := make([]string, len(opNames))
	for i, n := range opNames {
		parts[i] = n + "=" + strconv.Itoa(c.Weights[i])
	}
	return strings.Join(parts, " ")
}

// ParseWeights applies a WeightsString (or any space-separated op=N list)
// to the default config.
func ParseWeights(s string) (GenConfig, error) {
	c := DefaultGenConfig
	for _, f := range strings.Fields(s) {
		if err := c.SetWeight(f); err != nil {
			return c, err
		}
	}
	return c, c.Validate()
}
