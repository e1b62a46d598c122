// Package mp4 checks and builds ISO base media files (ISO/IEC 14496-12, "MP4").
//
// It is the media check of the contract's verification step (SPEC §3 Commit): an
// object only verifies as MP4 if a box walk finds a leading ftyp, a moov whose mvhd
// has a positive duration and timescale and which holds at least one trak, and an
// mdat, with every box size consistent
// with its parent and the file. Check reads untrusted bytes, so it never allocates
// in proportion to a declared box size, bounds recursion depth and box count, and
// reports every rejection as an error matching ErrInvalid, which lets the verifier
// tell a bad upload (fail the job) from a read error (retry later).
//
// Synthetic builds a small deterministic file that passes Check; the agent's
// built-in synthetic service and the tests use it, so both sides of the verifier
// agree on what a minimal valid output is. The package imports only the standard
// library because the server and the agent both depend on it.
package mp4
