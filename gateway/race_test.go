//go:build race

package gateway

// burstCycles is how many connect-and-drop cycles TestBurstOfDropsBackToBaseline
// runs: under the race detector every cycle (an upgrade, an upstream TLS
// dial, a session) costs several times more, so a quarter of the 2,000.
const burstCycles = 500
