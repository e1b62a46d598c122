// Package repolinks holds a test that keeps the repository self-contained:
// the contract lives in docs/SPEC.md, and no file points outside the tree
// a user clones.
package repolinks
