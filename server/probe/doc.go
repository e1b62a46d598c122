// Package probe runs ffprobe on a verified output and checks what it finds
// against a service's verification profile (protocol.VerifyProfile).
//
// ffprobe reads an untrusted file, so a run is bounded: a timeout, a
// process group of its own that is killed as a whole when the timeout
// fires (ffprobe spawns nothing today, but a kill of the group leaves no
// straggler if a build does), a cap on what it may print, and -probesize
// and -analyzeduration caps on what it reads and decodes to find the
// streams, which is what bounds its memory. The structural MP4 walk
// (internal/mp4) runs first, so ffprobe only sees files whose boxes fit.
package probe
