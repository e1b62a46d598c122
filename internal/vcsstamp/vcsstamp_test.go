package vcsstamp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// go test does not stamp the binary, so this reads git in the package's
// directory, which is inside the repository's checkout.
func TestCommitReadsTheCheckout(t *testing.T) {
	commit, _ := Commit()
	require.Regexp(t, `^[0-9a-f]{40}$`, commit)
}
