package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/rendermac/rendermac/internal/vcsstamp"
)

// runVersion is `rendermac version` (and `rendermac --version`): the module
// version, the commit and the build tags this binary was built from, which
// say whether it is the shipped build or the harness's.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	set := newFlagSet("version", "", stderr)
	if err := parseFlags(set, args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	commit, dirty := vcsstamp.Commit()
	fmt.Fprint(stdout, versionText(bi, commit, dirty))
	return nil
}

// versionText formats what runVersion prints; bi may be nil (a binary
// built without module support).
func versionText(bi *debug.BuildInfo, commit string, dirty bool) string {
	version, tags := "(unknown)", ""
	if bi != nil {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "-tags" {
				tags = s.Value
			}
		}
	}
	if tags == "" {
		tags = "none (the shipped build: no fault points, broken variants or Docker client)"
	}
	if dirty {
		commit += " (with uncommitted changes)"
	}
	return fmt.Sprintf("rendermac %s\ncommit     %s\nbuild tags %s\ngo         %s %s/%s\n",
		version, commit, tags, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
