package client

import (
	"fmt"
	"maps"
	"slices"
)

// appendParams appends params as a JSON object whose string bytes are the
// params' own, invalid UTF-8 included: encoding/json would replace such
// bytes with U+FFFD, so the API would see, and store, a value the caller
// did not give. The API refuses such a value with a validation_error
// naming the param instead. Keys are sorted, and quotes, backslashes and
// control bytes are escaped as JSON requires. Nil params are JSON null, as
// encoding/json writes a nil map (the API reads it as no params).
func appendParams(out []byte, params map[string]string) []byte {
	if params == nil {
		return append(out, "null"...)
	}
	out = append(out, '{')
	for i, k := range slices.Sorted(maps.Keys(params)) {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendRawJSONString(out, k)
		out = append(out, ':')
		out = appendRawJSONString(out, params[k])
	}
	return append(out, '}')
}

func appendRawJSONString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c < 0x20:
			out = fmt.Appendf(out, `\u%04x`, c)
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}
