// Package client is the Go client of RenderMac's HTTP API for buyers
// (docs/SPEC.md section 6): create jobs with an inline or an uploaded
// input, read, list, cancel and follow them, wait until they end, download
// their outputs with the SHA-256 checked, and verify the webhooks the
// control plane sends.
//
// Every call takes a context and every request goes through the
// *http.Client given with WithHTTPClient (http.DefaultClient otherwise), so
// TLS, proxies and timeouts are the caller's. The bodies are the types of
// package protocol/buyer, the one definition the server encodes.
//
// A refusal of the API is an *Error carrying the HTTP status and the API's
// error code, message and field; errors.As finds it. A download whose bytes
// do not hash to the job's recorded SHA-256 is an *IntegrityError, and the
// bytes are not kept by DownloadFile.
//
// Uploading an input (Upload, UploadFile) is the API's three steps done for
// the caller: the file is hashed as it is read (POST /v1/inputs needs its
// size and SHA-256 first), declared, and streamed to the create-only
// upload grant, hashed again on the way so that a file that changed in
// between is refused here rather than by the job's creation. No step holds
// the whole file in memory.
//
// Wait follows a job until it is terminal. The API has neither server-sent
// events nor a long-polling read for buyers, so Wait polls GET
// /v1/jobs/{id} with a growing interval (WithPollInterval), honoring a
// Retry-After header when the server asks for one; it never spins.
//
// The command `rendermac jobs` (docs/client.md) is built on this package,
// and so are the harness's load generator and end-to-end tests.
package client
