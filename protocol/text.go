package protocol

import (
	"strings"
	"unicode/utf8"
)

// ValidText reports whether s can be stored as Postgres text (and jsonb):
// valid UTF-8 with no NUL byte. A request field that is not is a
// validation_error naming the field, in the model and the server alike,
// never a database error.
func ValidText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
