//go:build !unix

package bench

import "time"

// processCPUTime reports that this platform's process CPU time is not known
// here (no getrusage): the benchmarks then leave out cpu-ms/MiB.
func processCPUTime() (time.Duration, bool) { return 0, false }
