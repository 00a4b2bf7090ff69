package leakcheck

import (
	"strings"
	"testing"
)

func parked(stop chan struct{}) { <-stop }

// TestFind sees a goroutine left running, names it, and no longer reports
// it once it ended or when it was running before IgnoreCurrent.
func TestFind(t *testing.T) {
	stop := make(chan struct{})
	started := make(chan struct{})
	go func() { close(started); parked(stop) }()
	<-started
	err := find(nil)
	if err == nil || !strings.Contains(err.Error(), "leakcheck.parked") {
		t.Fatalf("a parked goroutine is not reported: %v", err)
	}
	for _, o := range []Option{
		IgnoreCurrent(),
		IgnoreAnyFunction("github.com/wsmux/wsmux/internal/testkit/leakcheck.parked"),
		IgnoreTopFunction("github.com/wsmux/wsmux/internal/testkit/leakcheck.parked"),
	} {
		if err := find([]Option{o}); err != nil {
			t.Fatalf("an ignored goroutine is reported: %v", err)
		}
	}
	if err := find([]Option{IgnoreAnyFunction("github.com/wsmux/wsmux/internal/testkit/leakcheck.other")}); err == nil {
		t.Fatal("a goroutine not ignored is not reported")
	}
	if err := find([]Option{IgnoreCurrent()}); err != nil {
		t.Fatalf("a goroutine running before IgnoreCurrent is reported: %v", err)
	}
	close(stop)
	if err := find(nil); err != nil {
		t.Fatalf("a goroutine that ended is reported: %v", err)
	}
}
