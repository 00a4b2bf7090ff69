//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPUTime returns the CPU time this process has used so far, user plus
// system, over all its threads (getrusage RUSAGE_SELF), and whether the
// platform could say.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
