package evidence

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// fileStem follows the date in every file name, so a directory of cards
// sorts by day and each day's four files sit together.
const fileStem = "-phase-fault-qualification"

// FileNames returns the four base names of c's files, all named by c.Date:
// YYYY-MM-DD-phase-fault-qualification.md, .json, -junit.xml and .html.
func FileNames(c Card) (md, json, junit, html string) {
	base := c.Date + fileStem
	if c.MutationScore != nil { // a mutation card never overwrites that day's qualification card
		base = c.Date + "-mutation-score"
	}
	return base + ".md", base + ".json", base + "-junit.xml", base + ".html"
}

// WriteAll renders the Markdown, JSON, JUnit and HTML files into dir
// (created if missing) and returns their paths in that order. Everything is
// rendered before anything is written, so a card that fails to render leaves
// dir untouched; each file is written to a temporary file in dir, synced and
// renamed over its name, so a reader never sees a half-written card. On a
// write error it returns the paths already written with the error.
func WriteAll(dir string, c Card, o WriteOptions) ([]string, error) {
	// Validate first: the date becomes part of every path.
	if err := c.Validate(); err != nil {
		return nil, err
	}
	md, js, junit, html := FileNames(c)
	files := []struct {
		name  string
		write func(io.Writer, Card, WriteOptions) error
	}{
		{md, WriteMarkdown}, {js, WriteJSON}, {junit, WriteJUnit}, {html, WriteHTML},
	}
	rendered := make([][]byte, len(files))
	for i, f := range files {
		var buf bytes.Buffer
		if err := f.write(&buf, c, o); err != nil {
			return nil, fmt.Errorf("render %s: %w", f.name, err)
		}
		rendered[i] = buf.Bytes()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create evidence dir: %w", err)
	}
	paths := make([]string, 0, len(files))
	for i, f := range files {
		path := filepath.Join(dir, f.name)
		if err := writeAtomic(path, rendered[i]); err != nil {
			return paths, fmt.Errorf("write %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// writeAtomic replaces path with data via a temporary file in the same
// directory (rename is atomic only within one file system).
func writeAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	// CreateTemp makes the file 0600; cards are meant to be shared.
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	// Sync before rename so a crash cannot leave the new name pointing at
	// an empty file.
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
