package pgprovider

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// tail returns the last n lines of s: server logs are long, the cause of
// a failure is at the end.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the file's content after offset, i.e. what one start
// attempt logged.
func readFrom(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b)
}

// traversableByOthers reports whether every ancestor of dir has o+x, i.e.
// whether the postgres user can reach a data dir created below it.
func traversableByOthers(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// cleanStale removes temp dirs of clusters whose owning Go process and
// postmaster are both gone (the owner was killed before Close ran). Dirs of
// live processes, including other test binaries running in parallel, are
// left alone.
func cleanStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "pgprovider-*-*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), "pgprovider-")
		pid, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '-'), 0)])
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if pm, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && processAlive(pm) {
				continue
			}
		}
		_ = os.RemoveAll(d)
	}
}

// findBinDir prefers an explicit dir, then PATH (the user's choice), then
// distro locations, PostgreSQL 15 first.
func findBinDir(explicit string) (string, error) {
	has := func(dir string) bool {
		for _, n := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if explicit != "" {
		if has(explicit) {
			return explicit, nil
		}
		return "", fmt.Errorf("Options.BinDir %s lacks initdb/postgres", explicit)
	}
	var cands []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			cands = append(cands, filepath.Dir(r))
		}
		cands = append(cands, filepath.Dir(p))
	}
	cands = append(cands, "/usr/lib/postgresql/15/bin", "/usr/pgsql-15/bin",
		"/opt/homebrew/opt/postgresql@15/bin", "/usr/local/opt/postgresql@15/bin")
	others, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(others) - 1; i >= 0; i-- { // lexical desc is fine for 10..99
		cands = append(cands, others[i])
	}
	for _, d := range cands {
		if has(d) {
			return d, nil
		}
	}
	return "", errors.New("no initdb+postgres found on PATH or in /usr/lib/postgresql/*/bin")
}

func lookupRunAs() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, but initdb/postgres refuse root and there is no 'postgres' user to run them as (%v); create one (useradd -r postgres) or run as non-root", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &runAs{uid: uid, gid: gid}, nil
}
