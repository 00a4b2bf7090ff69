//go:build unix

package recording

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/ops"
)

// busyTerminal is output like a busy terminal's: listings and build logs
// with colours, some UTF-8, and a status line redrawn in place.
func busyTerminal(n int) []byte {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "-rw-r--r-- 1 app app %8d Dec  7 06:%02d \x1b[01;34mfile-%05d.tar.gz\x1b[0m  résumé ✓\r\n", i*7919%100000, i%60, i)
		if i%8 == 0 {
			fmt.Fprintf(&b, "\x1b[2K\r[%3d%%] building target %d…", i%100, i)
		}
	}
	return []byte(b.String()[:n])
}

// cpuTime is the process's CPU time so far (user and system): the
// recorder's work is on two goroutines, the session's and the writer's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRecordBusyTerminal measures what recording costs per byte of
// terminal output, into a directory sink, for the reads of a flood (4
// KiB) and of interactive use (64 bytes): the process's CPU time per byte
// (cpu-ns/out-byte, both goroutines; ns/op is wall time) and the
// recording's bytes per byte of output (rec-bytes/out-byte). The bounds
// are lifted so that every byte is recorded; the loop lets the writer
// catch up rather than overflow the buffer. docs/gateway.md turns these
// into the cost of a minute of a busy terminal.
func BenchmarkRecordBusyTerminal(b *testing.B) {
	for _, chunk := range []int{4096, 64} {
		b.Run(fmt.Sprintf("reads=%dB", chunk), func(b *testing.B) {
			dir := b.TempDir()
			r, err := New(Config{Sink: &DirSink{Dir: dir}, MaxBytes: 1 << 40, Rate: 1 << 40, Burst: 1 << 40, Buffer: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			out := busyTerminal(1 << 20)
			s, err := r.Start(context.Background(), Meta{Kind: "exec", Caller: "bench", Namespace: "a", Pod: "p", TTY: true, Start: time.Now()})
			if err != nil {
				b.Fatal(err)
			}
			s.Resize(120, 40)
			b.SetBytes(int64(chunk))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			off := 0
			for range b.N {
				if off+chunk > len(out) {
					off = 0
				}
				s.Output(out[off : off+chunk])
				off += chunk
				for s.backlog() > 8<<20 {
					runtime.Gosched()
				}
			}
			if err := s.Close(End{Exit: "0"}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(int64(b.N)*int64(chunk)), "cpu-ns/out-byte")
			files, _ := filepath.Glob(filepath.Join(dir, "*.cast"))
			st, err := os.Stat(files[0])
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.Size())/float64(int64(b.N)*int64(chunk)), "rec-bytes/out-byte")
			if d := droppedBytes(r); d > 0 {
				b.Fatalf("%v bytes dropped: the benchmark measured less than it claims", d)
			}
		})
	}
}

func droppedBytes(r *Recorder) float64 {
	var n float64
	for _, reason := range []string{"rate", "size", "buffer", "failed"} {
		n += ops.Value(r.cfg.Metrics.Dropped.WithLabelValues(reason))
	}
	return n
}

// backlog is the bytes waiting for the sink.
func (s *Session) backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}
