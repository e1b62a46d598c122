package buyer

// Error codes the API answers with besides the contract's reply codes
// (protocol.CodeValidation, CodeInsufficientFunds, CodeIdempotencyConflict,
// CodeNotFound, CodeJobTerminal), which it passes through unchanged.
const (
	CodeUnauthorized       = "unauthorized"
	CodeBadRequest         = "bad_request"
	CodeBodyTooLarge       = "body_too_large"
	CodeInvalidKey         = "invalid_key"
	CodeGrantRequired      = "grant_required"
	CodeGrantExpired       = "grant_expired"
	CodeGrantInvalid       = "grant_invalid"
	CodeInvalidPairingCode = "invalid_pairing_code"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeNotReady           = "not_ready"
	CodeInternal           = "internal"
	// CodeOutputSealed refuses an upload to an attempt's output key once
	// the attempt has left its lease phases (committing or ended): the
	// output is write-once from its claim on (invariant 8).
	CodeOutputSealed = "output_sealed"
	// CodeInputSealed refuses a second PUT of an uploaded input: its key is
	// create-only, so the bytes jobs were checked against never change.
	CodeInputSealed = "input_sealed"
	// CodeInvalidCursor refuses a cursor this server did not issue for this
	// buyer and query.
	CodeInvalidCursor = "invalid_cursor"
	// CodeForbidden refuses /metrics to a client that is not on loopback
	// when no token is configured, and the console to a buyer or device.
	CodeForbidden = "forbidden"
)
