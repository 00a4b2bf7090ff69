//go:build !race

package mux

const raceEnabled = false

// integritySize is what each stream of the integrity tests sends each way.
const integritySize = 4 << 20
