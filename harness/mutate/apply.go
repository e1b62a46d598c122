// Package mutate is the source mutation campaign (rendermac mutate, make
// mutate): it copies the source tree, applies each mutant of a catalogue
// of small semantic changes to the server, runs the bounded qualify gate
// (and optionally the mutated package's tests) on the copy, and reports
// which check killed each mutant and which survived.
//
// A mutant is a source edit applied to a copy of the tree, not one of the
// broken variants (model.Variant, fencing.Variant, gateway.Variant) that a
// -tags mutations build compiles in and a flag selects at run time.
//
// The applier is patch-based: a mutant names a file, an exact snippet and
// its replacement. No Go mutation tool is served by this workplace's
// module proxy; a hand-written catalogue also lets each mutant be a real
// fault of the contract (a fence predicate, a lock, a clock) rather than a
// random operator swap.
package mutate

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Apply rewrites m.File under root with the mutation and returns a func
// that restores the original. It fails, naming the mutant and file, unless
// the snippet occurs exactly once.
func Apply(root string, m Mutant) (restore func() error, err error) {
	path := filepath.Join(root, filepath.FromSlash(m.File))
	orig, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	if n := strings.Count(string(orig), m.Old); n != 1 {
		return nil, fmt.Errorf("mutant %s: snippet %q occurs %d times in %s (want exactly 1): update the catalogue",
			m.ID, m.Old, n, m.File)
	}
	mutated := strings.Replace(string(orig), m.Old, m.New, 1)
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	if err := os.WriteFile(path, []byte(mutated), info.Mode().Perm()); err != nil {
		return nil, fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	return func() error { return os.WriteFile(path, orig, info.Mode().Perm()) }, nil
}

// Check verifies that every mutant of list applies to root (exactly one
// match each) without changing anything.
func Check(root string, list []Mutant) error {
	var errs []string
	ids := map[string]bool{}
	for _, m := range list {
		if ids[m.ID] {
			errs = append(errs, fmt.Sprintf("mutant %s: duplicate id", m.ID))
		}
		ids[m.ID] = true
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
		if err != nil {
			errs = append(errs, fmt.Sprintf("mutant %s: %v", m.ID, err))
			continue
		}
		if n := strings.Count(string(b), m.Old); n != 1 {
			errs = append(errs, fmt.Sprintf("mutant %s: snippet %q occurs %d times in %s (want exactly 1)", m.ID, m.Old, n, m.File))
		}
		if m.Old == m.New {
			errs = append(errs, fmt.Sprintf("mutant %s: changes nothing", m.ID))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("mutation catalogue does not fit the tree:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// skipDirs are not copied: version control, build output, evidence.
var skipDirs = map[string]bool{".git": true, "bin": true, "evidence-out": true, "rendermac-failures": true, "node_modules": true}

// CopyTree copies the source tree at src into dst (which must not exist
// or be empty), leaving out skipDirs. Files keep their permission bits.
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel != "." && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil // sockets, symlinks: not source
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
}
