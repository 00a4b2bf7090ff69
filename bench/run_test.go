package bench

import (
	"context"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestRunAndRender(t *testing.T) {
	var lines []string
	results, err := Run(context.Background(), Options{
		Workloads:  []string{"Echo64", "Bulk1/dir=s2c"},
		Transports: []string{"tcp", "ws"},
		Benchtime:  "20x",
	}, func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 4 {
		t.Fatalf("progress lines: %q", lines)
	}
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Workload+" "+r.Transport+" "+r.Metric] = true
		if r.Metric == "ns/op" && (r.Value <= 0 || r.Unit != "ns" || r.HigherIsBetter) {
			t.Errorf("bad result %+v", r)
		}
	}
	for _, want := range []string{"Echo64 tcp ns/op", "Echo64 ws allocs/op", "Bulk1/dir=s2c ws MB/s"} {
		if !seen[want] {
			t.Errorf("no result %q in %v", want, results)
		}
	}
	if _, ok := processCPUTime(); ok && !seen["Bulk1/dir=s2c ws "+CPUPerMiB] {
		t.Errorf("no %s for Bulk1 in %v", CPUPerMiB, results)
	}
	if seen["Echo64 ws "+CPUPerMiB] {
		t.Errorf("Echo64 reports %s; it moves too little for it to mean anything", CPUPerMiB)
	}
	var text, md strings.Builder
	if err := RenderText(&text, results, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := RenderMarkdown(&md, results, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Echo64: ns/op (lower is better)", "Bulk1/dir=s2c: MB/s (higher is better)", "vs ws", "1.00x"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text tables lack %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(md.String(), "| transport | MB/s | vs ws |") {
		t.Errorf("markdown tables:\n%s", md.String())
	}
	if _, err := Run(context.Background(), Options{Workloads: []string{"Nope"}}, nil); err == nil {
		t.Error("unknown workload accepted")
	}
	goleak.VerifyNone(t, leakOptions()...)
}

func TestParseGoBench(t *testing.T) {
	const out = `goos: linux
BenchmarkBulk1/transport=tcp/dir=c2s-2 	   40000	     17000 ns/op	1904.00 MB/s	       0 B/op	       0 allocs/op
BenchmarkBulk1/transport=tcp/dir=c2s-2 	   40000	     18000 ns/op	1800.00 MB/s	       0 B/op	       0 allocs/op
BenchmarkBulk1/transport=yamux/dir=c2s-2 	   20000	     40000 ns/op	 800.00 MB/s	     158 B/op	       2 allocs/op
BenchmarkInteractive/transport=spdy-2 	     100	   7000000 ns/op	 700.0 bulk-MB/s	   7488000 p50-ns	  15710000 p99-ns	 100 B/op	  10 allocs/op
--- FAIL: BenchmarkNeverRead/transport=x
PASS
`
	rs, err := ParseGoBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4+4+4+6 {
		t.Fatalf("got %d results: %+v", len(rs), rs)
	}
	if r := rs[5]; r.Workload != "Bulk1/dir=c2s" || r.Transport != "tcp" || r.Metric != "MB/s" || r.Value != 1800 || r.Run != 1 || !r.HigherIsBetter {
		t.Errorf("second tcp MB/s: %+v", r)
	}
	var text strings.Builder
	if err := RenderText(&text, rs, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	// Median of 1904 and 1800; yamux is the best (only) peer.
	for _, want := range []string{"reference yamux (best peer)", "1852", "2.31x", "p99-ns", "15710000"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, text.String())
		}
	}
}

// TestRenderResults prints the tables for saved `go test -bench` output named
// by $WSMUX_BENCH_RESULTS (plain text, then Markdown); reference transport
// from $WSMUX_BENCH_REFERENCE.
func TestRenderResults(t *testing.T) {
	path := os.Getenv("WSMUX_BENCH_RESULTS")
	if path == "" {
		t.Skip("set WSMUX_BENCH_RESULTS to a file of go test -bench output")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := ParseGoBench(f)
	if err != nil {
		t.Fatal(err)
	}
	ro := RenderOptions{Reference: os.Getenv("WSMUX_BENCH_REFERENCE")}
	if err := RenderText(os.Stdout, rs, ro); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("\n")
	if err := RenderMarkdown(os.Stdout, rs, ro); err != nil {
		t.Fatal(err)
	}
}
