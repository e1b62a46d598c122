package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rendermac/rendermac/harness/evidence"
)

// githubActions reports a card to GitHub Actions when env says the run is
// one (GITHUB_ACTIONS=true): an ::error annotation per failure, carrying
// its replay command, on stdout; and the Markdown card (the .md among
// written) appended to $GITHUB_STEP_SUMMARY when that is set. Elsewhere
// it does nothing.
func githubActions(card evidence.Card, written []string, env func(string) string, stdout io.Writer) error {
	if env("GITHUB_ACTIONS") != "true" {
		return nil
	}
	for _, fl := range card.Failures {
		title := fl.Source
		if fl.Seed != 0 {
			title = fmt.Sprintf("%s seed %d", fl.Source, fl.Seed)
		}
		fmt.Fprintf(stdout, "::error title=%s::%s\n", ghEscape(title, true), ghEscape(fl.Detail+"\nreplay: "+fl.Replay, false))
	}
	summary := env("GITHUB_STEP_SUMMARY")
	if summary == "" {
		return nil
	}
	for _, p := range written {
		if !strings.HasSuffix(p, ".md") {
			continue
		}
		md, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fh, err := os.OpenFile(summary, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
		}
		_, err = fh.Write(append(md, '\n'))
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return nil
}

// ghEscape escapes a workflow command's message (or, with property, a
// property value) as the runner decodes it.
func ghEscape(s string, property bool) string {
	r := []string{"%", "%25", "\r", "%0D", "\n", "%0A"}
	if property {
		r = append(r, ":", "%3A", ",", "%2C")
	}
	return strings.NewReplacer(r...).Replace(s)
}
