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
	p.Update("model", 1, 10)
	p.Done("model")
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

// Two phases at once (qualify's scenarios beside a campaign) share one
// line, each short; the one that ends keeps its full line, and the other
// is drawn alone again below it.
func TestProgressShowsPhasesSideBySide(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := &progress{w: &buf, tty: true, now: func() time.Time { return now }, phases: map[string]*phase{}}
	p.Update("model-vs-postgres", 0, 500)
	p.Update("scenarios", 0, 48)
	now = now.Add(10 * time.Second)
	p.Update("model-vs-postgres", 100, 500)
	p.Update("scenarios", 12, 48)
	lines := strings.Split(buf.String(), "\r")
	last := lines[len(lines)-1]
	for _, want := range []string{"model-vs-postgres 100/500 ETA 40s", " | ", "scenarios 12/48 ETA 30s"} {
		if !strings.Contains(last, want) {
			t.Errorf("side-by-side line %q lacks %q", last, want)
		}
	}
	buf.Reset()
	now = now.Add(30 * time.Second)
	p.Update("scenarios", 48, 48)
	p.Done("scenarios")
	out := buf.String()
	if !strings.Contains(out, "48/48") || !strings.Contains(out, "\n") {
		t.Errorf("the ended phase's line is not kept: %q", out)
	}
	after := out[strings.LastIndex(out, "\n")+1:]
	if !strings.Contains(after, "100/500") || strings.Contains(after, "scenarios") || !strings.Contains(after, "[") {
		t.Errorf("the running phase is not redrawn alone, in full: %q", after)
	}
	p.Done("model-vs-postgres")
	p.Done("never-started") // ends nothing, writes nothing
	if strings.Count(buf.String(), "\n") != 2 {
		t.Errorf("want one kept line per phase: %q", buf.String())
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
