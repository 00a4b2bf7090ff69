//go:build !unix

package mux

import "time"

// processCPU returns 0 where getrusage is not available: cpu-ms/MiB then
// reads 0.
func processCPU() time.Duration { return 0 }
