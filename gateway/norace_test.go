//go:build !race

package gateway

// burstCycles is how many connect-and-drop cycles TestBurstOfDropsBackToBaseline runs.
const burstCycles = 2000
