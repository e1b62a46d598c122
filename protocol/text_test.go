package protocol

import "testing"

func TestValidText(t *testing.T) {
	for s, want := range map[string]bool{"": true, "seed-1": true, "ünïcode ✓": true,
		"a\x00b": false, "a\xffb": false, "\xc3": false} {
		if got := ValidText(s); got != want {
			t.Errorf("ValidText(%q) = %v, want %v", s, got, want)
		}
	}
}
