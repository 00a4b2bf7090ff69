//go:build race

package wsio

const raceEnabled = true
