//go:build !linux

package main

import "os/exec"

// setParentDeathSignal does nothing here: only Linux has it. The servers
// of `compare serve` still stop by themselves (-for); a cmd/echo left
// behind by a harness that crashed must be stopped by hand.
func setParentDeathSignal(*exec.Cmd) {}
