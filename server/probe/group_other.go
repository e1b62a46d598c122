//go:build !unix

package probe

import "os/exec"

// ownGroup: without process groups a cancel kills ffprobe alone.
func ownGroup(*exec.Cmd) {}
