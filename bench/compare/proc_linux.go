package main

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel send cmd SIGTERM if this process
// dies before stopping it, so that no server outlives a crashed harness.
func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}
