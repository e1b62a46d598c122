package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressIsSilentOffATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf)
	p.update("model", 1, 10)
	p.done("model")
	if buf.Len() != 0 {
		t.Fatalf("progress wrote %q to a non-terminal", buf.String())
	}
}

func TestProgressLineShowsCountRateAndETA(t *testing.T) {
	got := progressLine("model", 25, 100, 5*time.Second)
	for _, want := range []string{"25/100", "5.0/s", "ETA 15s"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress line %q lacks %q", got, want)
		}
	}
}
