//go:build !unix

package llc

import "os/exec"

// killGroup leaves exec's default (kill the process itself); WaitDelay
// still bounds the wait for pipes held by its children.
func killGroup(cmd *exec.Cmd) {}
