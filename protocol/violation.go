package protocol

import "fmt"

// Violation is one broken invariant of SPEC section 4, as the model's
// checker and the SQL checks over the real rows both report it, so that a
// card or a test failure reads the same whichever found it.
type Violation struct {
	// Invariant is the SPEC section 4 number, 1..9.
	Invariant int
	// Message names the job, attempt, device or journal row concerned.
	Message string
}

// String renders the violation on one line, invariant number first.
func (v Violation) String() string {
	return fmt.Sprintf("invariant %d: %s", v.Invariant, v.Message)
}
