package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// CPUPerMiB is the metric every throughput workload reports beside MB/s: the
// CPU time of the whole process (user plus system, getrusage) per MiB moved
// while the clock ran, in milliseconds. Client and server run in this process,
// so it is the cost of both ends. Unlike MB/s it hardly depends on how busy
// or fast the machine is, so it compares runs on noisy or different machines.
const CPUPerMiB = "cpu-ms/MiB"

// cpuMeter measures the process CPU time a benchmark spends moving bytes.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

// startCPU starts measuring; call it where the benchmark's clock starts.
func startCPU() cpuMeter {
	t, ok := processCPUTime()
	return cpuMeter{start: t, ok: ok}
}

// report adds CPUPerMiB to b for moved bytes since startCPU. It reports
// nothing where the process CPU time is unknown or nothing moved.
func (m cpuMeter) report(b *testing.B, moved int64) {
	end, ok := processCPUTime()
	if !m.ok || !ok {
		return
	}
	if v, ok := cpuPerMiB(end-m.start, moved); ok {
		b.ReportMetric(v, CPUPerMiB)
	}
}

// cpuPerMiB converts cpu spent moving moved bytes into milliseconds per MiB;
// false when moved is not positive or cpu negative.
func cpuPerMiB(cpu time.Duration, moved int64) (float64, bool) {
	if moved <= 0 || cpu < 0 {
		return 0, false
	}
	return float64(cpu) / float64(time.Millisecond) / (float64(moved) / (1 << 20)), true
}

// Machine describes where the benchmarks ran.
type Machine struct {
	CPU        string `json:"cpu"` // CPUModel()
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
}

// ThisMachine describes the machine this process runs on.
func ThisMachine() Machine {
	return Machine{
		CPU:        CPUModel(),
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
	}
}

// String is the one-line description `wsmux-bench bench` prints: "Intel(R) Xeon(R)
// CPU @ 2.20GHz, 2 CPUs (GOMAXPROCS 2), go1.26.0 linux/amd64".
func (m Machine) String() string {
	return fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d), %s %s/%s", m.CPU, m.NumCPU, m.GOMAXPROCS, m.GoVersion, m.GOOS, m.GOARCH)
}

// CPUModel returns the CPU's model name: the first "model name" of
// /proc/cpuinfo on Linux, else runtime.GOARCH.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	if m := cpuModelFrom(f); m != "" {
		return m
	}
	return runtime.GOARCH
}

// cpuModelFrom returns the first non-empty "model name" value of a
// /proc/cpuinfo text, or "".
func cpuModelFrom(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			if v = strings.Join(strings.Fields(v), " "); v != "" {
				return v
			}
		}
	}
	return ""
}
