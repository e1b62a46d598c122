// Package artifact stores job inputs and attempt outputs and verifies committed
// outputs (SPEC §3 Commit, §6 Artifacts).
//
// Objects live under validated keys: inputs at InputKey(job) and outputs at the
// attempt-scoped OutputKey(job, attempt), so that a retried attempt can never
// overwrite, or be credited with, another attempt's upload. A Store backend
// writes atomically: a reader sees either no object or the whole object, never
// a partial upload. FS is the filesystem backend.
//
// Verify is the verification step of a commit: the object exists at the key,
// its size and SHA-256 match what the agent claimed, and the media check passes.
// A *VerifyError is a verdict on the upload (fail the job); any other error is
// a store or context failure that says nothing about the upload, so the caller
// must leave the attempt committing and let the sweeper verify again.
package artifact
