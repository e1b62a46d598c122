// Package archtest holds the architecture's import table as a test: which
// project packages each package may import, what the pure core may never
// reach (a subprocess, the database driver, the control plane), and that
// the control plane's tests do not link the qualification harness. The
// table is written as data here and rendered into docs/architecture.md
// (a test fails when the document's copy is not current); a package the
// table does not name fails the test, so a new package is placed in the
// architecture on purpose. Beside it, a test holds the set-up script
// (.ci/setup) to every program the code runs.
package archtest
