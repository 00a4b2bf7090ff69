package testnet

import (
	"testing"
	"time"
)

// TestGauge: WaitZero returns at once at zero, times out while something
// is in progress, and wakes when the last of it ends.
func TestGauge(t *testing.T) {
	var g Gauge
	if !g.WaitZero(0) {
		t.Fatal("an unused gauge is not at zero")
	}
	g.Add(2)
	if g.WaitZero(10 * time.Millisecond) {
		t.Fatal("WaitZero returned true at 2")
	}
	woke := make(chan bool)
	go func() { woke <- g.WaitZero(time.Minute) }()
	g.Add(-1)
	g.Add(-1)
	if !<-woke {
		t.Fatal("WaitZero did not see the count come to zero")
	}
	if g.Len() != 0 {
		t.Fatalf("Len = %d", g.Len())
	}
}
