//go:build gofuzz

package fuzz

import "testing"

// TestGoFuzzEntries runs the go-fuzz entries (real time) over the seeds, so
// that `go test -tags gofuzz ./fuzz/` keeps them working.
func TestGoFuzzEntries(t *testing.T) {
	for _, s := range sessionSeeds() {
		FuzzSessionRealTime(s.data)
	}
	for _, s := range pairSeeds() {
		FuzzSessionPairRealTime(s.data)
	}
}
