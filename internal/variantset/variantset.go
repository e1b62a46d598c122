// Package variantset is the one mechanism behind the deliberately broken
// variants of the service layer (server/fencing), the gateway and the agent:
// each names its variants in a file built only with -tags mutations and an
// empty Set in the default build's file, and answers Variants, CheckVariant
// and newVariant through a Set. The hooks that take a broken branch stay in
// the two files (a constant false in the default build, so the branches
// and the variants' names compile away: fencing's TestDefaultBuild tests).
package variantset

import (
	"errors"
	"fmt"
	"slices"
)

// ErrNone is why a default build refuses every variant but the correct one.
var ErrNone = errors.New("this binary was built without -tags mutations: it has no broken variants")

// Set is one part's broken variants; the zero name ("") is the correct
// behaviour, always accepted.
type Set[V ~string] struct {
	what string
	all  []V
}

// New is the set of what's variants (what names the part in errors:
// "server", "gateway", "agent"); none in a default build.
func New[V ~string](what string, all ...V) Set[V] { return Set[V]{what: what, all: all} }

// All lists the broken variants (a copy).
func (s Set[V]) All() []V { return slices.Clone(s.all) }

// Check accepts "" and every variant of the set; anything else is an error
// naming the known ones, or, in a build that has none, wrapping ErrNone.
func (s Set[V]) Check(v V) error {
	switch {
	case v == "" || slices.Contains(s.all, v):
		return nil
	case len(s.all) == 0:
		return fmt.Errorf("%s variant %q: %w", s.what, v, ErrNone)
	}
	return fmt.Errorf("unknown %s variant %q (known: %v)", s.what, v, s.all)
}

// Must is v, or a panic for a name Check refuses: callers check names
// first, so reaching the panic is a bug.
func (s Set[V]) Must(v V) V {
	if err := s.Check(v); err != nil {
		panic(err.Error())
	}
	return v
}
