//go:build !mutations

package scenarios

// variantsBuilt: without -tags mutations the server and the gateway have
// no broken variants, so a broken-by name that is no harness variant
// cannot be checked here (the tagged build that make test runs checks it).
const variantsBuilt = false
