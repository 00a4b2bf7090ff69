package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestNewDimensions runs one figure of each new dimension (read size, TLS,
// WAN) through Run on two transports, with the WAN durations shortened:
// each must produce its metrics, and the runs cap (Workload.Runs) and the
// transports' workload lists must hold.
func TestNewDimensions(t *testing.T) {
	defer func(w, m time.Duration) { wanWarmup, wanMeasure = w, m }(wanWarmup, wanMeasure)
	wanWarmup, wanMeasure = 20*time.Millisecond, 50*time.Millisecond
	var lines []string
	results, err := Run(context.Background(), Options{
		Workloads:  []string{"Bulk1Read/read=4KiB", "Bulk1Read/read=io.Copy", "TLSEcho64", "WANBulk1/" + wan20.String(), "WANInteractive/" + wan20.String()},
		Transports: []string{"tcp", "ws", "wsmux", "wsmux-httpstream-eventloop"},
		Benchtime:  "5x",
		Count:      2,
	}, func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range results {
		seen[r.Workload+" "+r.Transport+" "+r.Metric]++
	}
	for _, want := range []struct {
		key  string
		runs int
	}{
		{"Bulk1Read/read=4KiB wsmux MB/s", 2},
		{"Bulk1Read/read=io.Copy wsmux-httpstream-eventloop MB/s", 2},
		{"TLSEcho64 ws ns/op", 2},
		{"TLSEcho64 tcp ns/op", 2}, // Open waits for the handshake: Accept must do it
		{"WANBulk1/" + wan20.String() + " wsmux of-link", 1},
		{"WANBulk1/" + wan20.String() + " wsmux peak-inflight-B", 1},
		{"WANInteractive/" + wan20.String() + " ws p99-ns", 1},
	} {
		if seen[want.key] != want.runs {
			t.Errorf("%q: %d runs, want %d", want.key, seen[want.key], want.runs)
		}
	}
	if slices.ContainsFunc(results, func(r Result) bool {
		return r.Transport == "wsmux-httpstream-eventloop" && r.Workload == "TLSEcho64"
	}) {
		t.Error("wsmux-httpstream-eventloop ran a workload outside its list")
	}
	goleak.VerifyNone(t, leakOptions()...)
}
