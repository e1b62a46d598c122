package ratelimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// CodeRateLimited is the error code of a refused request (docs/SPEC.md
// section 6).
const CodeRateLimited = "rate_limited"

// Refuse answers 429 with a Retry-After header of wait in whole seconds
// (rounded up) and the API's JSON error body,
// {"code":"rate_limited","message":"too many <what>; retry after <N>s"}.
func Refuse(w http.ResponseWriter, what string, wait time.Duration) {
	secs := RetryAfterSeconds(wait)
	h := w.Header()
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{CodeRateLimited, fmt.Sprintf("too many %s; retry after %ds", what, secs)})
}
