//go:build !race

package wsio

const raceEnabled = false
