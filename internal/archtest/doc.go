// Package archtest holds the architecture's import table as a test: which
// project packages each package may import, what the pure core may never
// reach (a subprocess, the database driver, the control plane), and that
// the control plane's tests do not link the qualification harness. The
// table is the README's architecture section written as data; a package
// the table does not name fails the test, so a new package is placed in
// the architecture on purpose.
package archtest
