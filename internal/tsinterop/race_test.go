//go:build race

package tsinterop_test

// raceEnabled: -race slows the Go side past the time budget; the integrity
// test runs at full size in make test's run without -race.
const raceEnabled = true
