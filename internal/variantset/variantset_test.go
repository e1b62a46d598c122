package variantset

import (
	"errors"
	"strings"
	"testing"
)

type kind string

func TestCheckAcceptsTheCorrectAndTheKnownAndNamesTheRest(t *testing.T) {
	s := New[kind]("server", "a", "b")
	for _, v := range []kind{"", "a", "b"} {
		if err := s.Check(v); err != nil {
			t.Errorf("Check(%q) = %v, want nil", v, err)
		}
	}
	err := s.Check("c")
	if err == nil || !strings.Contains(err.Error(), `unknown server variant "c" (known: [a b])`) {
		t.Errorf("Check(c) = %v", err)
	}
	none := New[kind]("agent")
	if err := none.Check(""); err != nil {
		t.Errorf("the empty set refuses the correct variant: %v", err)
	}
	if err := none.Check("a"); !errors.Is(err, ErrNone) || !strings.Contains(err.Error(), `agent variant "a"`) {
		t.Errorf("the empty set's refusal = %v, want ErrNone naming the part", err)
	}
	all := s.All()
	all[0] = "x"
	if s.All()[0] != "a" {
		t.Error("All returns the set's own slice")
	}
	defer func() {
		if recover() == nil {
			t.Error("Must accepted an unknown variant")
		}
	}()
	s.Must("c")
}
