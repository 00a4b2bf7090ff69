//go:build !race

package tsinterop_test

const raceEnabled = false
