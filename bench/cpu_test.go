package bench

import (
	"crypto/sha256"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestCPUPerMiB(t *testing.T) {
	tests := []struct {
		cpu   time.Duration
		moved int64
		want  float64
		ok    bool
	}{
		{cpu: time.Millisecond, moved: 1 << 20, want: 1, ok: true},
		{cpu: 3 * time.Second, moved: 1 << 30, want: 3000.0 / 1024, ok: true},
		{cpu: 500 * time.Microsecond, moved: 2 << 20, want: 0.25, ok: true},
		{cpu: 0, moved: 1 << 20, want: 0, ok: true},
		{cpu: time.Millisecond, moved: 0},
		{cpu: time.Millisecond, moved: -1},
		{cpu: -time.Millisecond, moved: 1 << 20},
	}
	for _, tt := range tests {
		got, ok := cpuPerMiB(tt.cpu, tt.moved)
		if ok != tt.ok || got != tt.want {
			t.Errorf("cpuPerMiB(%v, %d) = %v, %v; want %v, %v", tt.cpu, tt.moved, got, ok, tt.want, tt.ok)
		}
	}
}

// processCPUTime never goes backwards and grows with work done on this
// goroutine (unix; elsewhere it must say it does not know).
func TestProcessCPUTime(t *testing.T) {
	t0, ok := processCPUTime()
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		if ok {
			t.Fatalf("processCPUTime on %s = %v, true; want the fallback", runtime.GOOS, t0)
		}
		return
	}
	if !ok {
		t.Fatal("processCPUTime not available on a unix system")
	}
	if t0 <= 0 {
		t.Fatalf("process CPU time %v after starting a test binary", t0)
	}
	// Hash until the count moves: no wall-clock bound, only a bound on work
	// (a few seconds of CPU at most) that fails a counter that never moves.
	sum := sha256.Sum256(nil)
	for i := 0; i < 20_000_000; i++ {
		sum = sha256.Sum256(sum[:])
		if i%10_000 != 0 {
			continue
		}
		t1, ok := processCPUTime()
		if !ok {
			t.Fatal("processCPUTime stopped working")
		}
		if t1 < t0 {
			t.Fatalf("process CPU time went backwards: %v then %v", t0, t1)
		}
		if t1 > t0 {
			return
		}
	}
	t.Fatalf("process CPU time stuck at %v after 20M SHA-256 blocks", t0)
}

func TestCPUModelFrom(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"x86", "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: Other\n", "Intel(R) Xeon(R) CPU @ 2.20GHz"},
		{"spaces squeezed", "model name\t:  AMD   EPYC 7B13  \n", "AMD EPYC 7B13"},
		{"first non-empty", "model name\t:\nmodel name\t: Second\n", "Second"},
		{"arm64 has none", "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		if got := cpuModelFrom(strings.NewReader(tt.in)); got != tt.want {
			t.Errorf("%s: cpuModelFrom = %q, want %q", tt.name, got, tt.want)
		}
	}
	if CPUModel() == "" {
		t.Error("CPUModel is empty; want a model name or GOARCH")
	}
}

func TestMachineString(t *testing.T) {
	m := Machine{CPU: "Some CPU @ 3GHz", NumCPU: 4, GOMAXPROCS: 2, GoVersion: "go1.26.0", GOOS: "linux", GOARCH: "amd64"}
	if got, want := m.String(), "Some CPU @ 3GHz, 4 CPUs (GOMAXPROCS 2), go1.26.0 linux/amd64"; got != want {
		t.Errorf("Machine.String() = %q, want %q", got, want)
	}
	if here := ThisMachine(); here.CPU == "" || here.NumCPU < 1 || here.GOMAXPROCS < 1 || here.GOARCH != runtime.GOARCH {
		t.Errorf("ThisMachine() = %+v", here)
	}
}

// cpuResults are two runs of Bulk1/dir=c2s on three transports, and one
// Echo64 run, as Run would return them; yamux has no CPU figure (as on a
// platform without getrusage).
func cpuResults() []Result {
	var rs []Result
	add := func(w, tr, m string, v float64, run int) { rs = append(rs, newResult(w, tr, m, v, run)) }
	for run, scale := range []float64{1, 3} {
		add("Bulk1/dir=c2s", "ws", "MB/s", 4000*scale, run)
		add("Bulk1/dir=c2s", "ws", CPUPerMiB, 0.5*scale, run)
		add("Bulk1/dir=c2s", "ws", "ns/op", 8000, run)
		add("Bulk1/dir=c2s", "yamux", "MB/s", 1000*scale, run)
		add("Bulk1/dir=c2s", "yamux", "ns/op", 32000, run)
		add("Bulk1/dir=c2s", "wsmux", "MB/s", 2000*scale, run)
		add("Bulk1/dir=c2s", "wsmux", CPUPerMiB, 1*scale, run)
		add("Bulk1/dir=c2s", "wsmux", "ns/op", 16000, run)
		add("Bulk1/dir=c2s", "wsmux", "allocs/op", 0, run)
	}
	add("Echo64", "wsmux", "ns/op", 20000, 0)
	add("Echo64", "ws", "ns/op", 10000, 0)
	return rs
}

func TestRenderCPUColumns(t *testing.T) {
	rs := cpuResults()
	if r := rs[1]; r.Unit != "ms/MiB" || r.HigherIsBetter {
		t.Fatalf("CPU result %+v: want unit ms/MiB, lower is better", r)
	}
	var md strings.Builder
	if err := RenderMarkdown(&md, rs, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	// Medians: ws 8000 MB/s and 1 ms/MiB, wsmux 4000 and 2, yamux 2000 and none.
	for _, want := range []string{
		"**Bulk1/dir=c2s: MB/s (higher is better); reference wsmux; ceiling ws; cpu-ms/MiB: process CPU, both ends (lower is better)**",
		"| transport | MB/s | vs wsmux | vs ws | cpu-ms/MiB | cpu vs wsmux | cpu vs ws | ns/op | allocs/op |",
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|",
		"| ws | 8000 | 2.00x | 1.00x | 1 | 0.50x | 1.00x | 8000 | - |",
		"| yamux | 2000 | 0.50x | 0.25x | - | - | - | 32000 | - |",
		"| wsmux | 4000 | 1.00x | 0.50x | 2 | 1.00x | 2.00x | 16000 | 0 |",
		"**Echo64: ns/op (lower is better); reference wsmux; ceiling ws**",
		"| transport | ns/op | vs wsmux | vs ws |\n",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Count(md.String(), "cpu") != strings.Count(strings.SplitN(md.String(), "**Echo64", 2)[0], "cpu") {
		t.Errorf("a table without CPU figures has CPU columns:\n%s", md.String())
	}

	var text strings.Builder
	if err := RenderText(&text, rs, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	if len(lines) < 5 {
		t.Fatalf("text tables:\n%s", text.String())
	}
	header, ws := strings.Fields(lines[1]), strings.Fields(lines[2])
	wantHeader := []string{"transport", "MB/s", "vs", "wsmux", "vs", "ws", "cpu-ms/MiB", "cpu", "vs", "wsmux", "cpu", "vs", "ws", "ns/op", "allocs/op"}
	if strings.Join(header, " ") != strings.Join(wantHeader, " ") {
		t.Errorf("text header %q, want %q", header, wantHeader)
	}
	if want := "ws 8000 2.00x 1.00x 1 0.50x 1.00x 8000 -"; strings.Join(ws, " ") != want {
		t.Errorf("text row %q, want %q", strings.Join(ws, " "), want)
	}
	// Columns line up: every row of the first table is as wide as its header.
	for _, l := range lines[2:5] {
		if len(l) != len(lines[1]) {
			t.Errorf("row %q is %d wide, header %d", l, len(l), len(lines[1]))
		}
	}
}

func TestParseGoBenchCPU(t *testing.T) {
	const out = "cpu: AMD EPYC\n" +
		"BenchmarkStreams64/transport=wsmux-2 \t 50 \t 72942845 ns/op \t 920.02 MB/s \t 1.353 cpu-ms/MiB \t 178721 B/op \t 31 allocs/op\n"
	rs, err := ParseGoBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range rs {
		if r.Metric == CPUPerMiB {
			found = true
			if r.Workload != "Streams64" || r.Transport != "wsmux" || r.Value != 1.353 || r.Unit != "ms/MiB" || r.HigherIsBetter {
				t.Errorf("CPU result %+v", r)
			}
		}
	}
	if !found {
		t.Errorf("no %s in %+v", CPUPerMiB, rs)
	}
}

// TestRenderCeilingNote: the StreamsN tables say that the ceilings open a
// connection per stream (a multiplexer has one); the others say nothing.
func TestRenderCeilingNote(t *testing.T) {
	rs := []Result{
		newResult("Streams64", "ws", "MB/s", 6000, 0),
		newResult("Streams64", "wsmux", "MB/s", 2400, 0),
		newResult("Bulk1/dir=c2s", "ws", "MB/s", 3000, 0),
		newResult("Bulk1/dir=c2s", "wsmux", "MB/s", 3200, 0),
	}
	var text strings.Builder
	if err := RenderText(&text, rs, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Streams64: MB/s (higher is better); reference wsmux; ceiling ws (one connection per stream)\n",
		"Bulk1/dir=c2s: MB/s (higher is better); reference wsmux; ceiling ws\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text tables lack %q:\n%s", want, text.String())
		}
	}
}
