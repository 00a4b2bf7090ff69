//go:build !unix

package testnet

import (
	"os"
	"os/exec"
)

// Without process groups, a stop ends the master process only.
func newProcessGroup(*exec.Cmd) {}

func terminateGroup(p *os.Process) { _ = p.Kill() }

func killGroup(p *os.Process) { _ = p.Kill() }
