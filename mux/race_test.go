//go:build race

package mux

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts are meaningless.
const raceEnabled = true

// integritySize is what each stream of the integrity tests sends each way.
// Under the race detector 256 x 4 MiB took 71 s (TCP 37 s, net.Pipe 35 s,
// 2 shared vCPUs), too long for make test; 256 x 512 KiB takes about 13 s.
// The full 4 MiB runs without -race (norace_test.go).
const integritySize = 512 << 10
