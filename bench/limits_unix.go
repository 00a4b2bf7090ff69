//go:build unix

package bench

import "syscall"

// fdLimit returns the soft limit on open files (the Go runtime raises it to the
// hard limit at start-up), or 0 when it cannot be read.
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur > 1<<30 {
		return 1 << 30
	}
	return int(rl.Cur)
}
