// Package vcsstamp says which commit this binary was built from. It is the
// one package of the provenance story that runs a program (git), so it is
// kept apart from internal/provenance: the model and the generator hash
// their own sources through that pure leaf and never reach a subprocess.
package vcsstamp

import (
	"os/exec"
	"runtime/debug"
	"strings"
)

// Commit returns the commit this binary was built from and whether the tree
// had changes: from the build's VCS stamp when `go build` recorded one,
// else from git in the working directory (`go run`, `go test`), else
// "unknown".
func Commit() (commit string, dirty bool) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			return rev, dirty
		}
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown", false
	}
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), err == nil && len(st) > 0
}
