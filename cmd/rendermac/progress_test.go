package main

import (
	"bytes"
	"context"
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

// fuzz --progress draws the same terminal-only line as qualify: redirected,
// it adds nothing (the old plain "\r3/3 seeds" count is gone).
func TestFuzzProgressIsSilentOffATerminal(t *testing.T) {
	var so, se bytes.Buffer
	if err := runFuzz(context.Background(), []string{"--progress", "--seeds", "3", "--steps", "20", "--workers", "1"}, &so, &se); err != nil {
		t.Fatal(err, se.String())
	}
	if strings.ContainsAny(se.String()+so.String(), "\r\x1b") || strings.Contains(se.String(), "seeds\n") {
		t.Fatalf("fuzz --progress wrote progress to a non-terminal: %q", se.String())
	}
}
