//go:build unix

package testnet

import "syscall"

// Pause freezes the server (SIGSTOP): connections stay open and nothing
// answers, as with a server too slow to answer; Continue resumes it.
func (r *Redis) Pause() { _ = r.cmd.Process.Signal(syscall.SIGSTOP) }

// Continue resumes a paused server (SIGCONT).
func (r *Redis) Continue() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }
