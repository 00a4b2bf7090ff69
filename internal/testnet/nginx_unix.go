//go:build unix

package testnet

import (
	"os"
	"os/exec"
	"syscall"
)

// nginx runs in a process group of its own, so that a stop reaches its
// workers too.
func newProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

func terminateGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGTERM) }

func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }
