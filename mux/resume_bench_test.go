package mux

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkResumeBulk1 is the cost of resumption on a bulk transfer over
// loopback TCP (Dial and Upgrade; per op, one stream carries 16 MiB
// client to server in 32 KiB Writes and the op ends when the server read
// all of it), on the default fast paths, the goroutine driver and the
// event loop.
// resume=on retains every batch until acknowledged and sends RECEIVED
// frames back; on against off on the same driver is the price of
// resumption. Besides MB/s it reports the CPU of both ends per MiB
// (cpu-ms/MiB).
func BenchmarkResumeBulk1(b *testing.B) {
	for _, bc := range []struct {
		name   string
		resume bool
		drv    Driver
	}{
		{"resume=off/driver=fastpaths", false, DriverFastPaths},
		{"resume=on/driver=fastpaths", true, DriverFastPaths},
		{"resume=off/driver=goroutines", false, DriverGoroutines},
		{"resume=on/driver=goroutines", true, DriverGoroutines},
		{"resume=off/driver=eventloop", false, DriverEventLoop},
		{"resume=on/driver=eventloop", true, DriverEventLoop},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Resume = bc.resume
			cfg.Driver = bc.drv
			if bc.resume {
				cfg.ResumeRegistry = &ResumeRegistry{}
			}
			done := make(chan int64, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s, err := Upgrade(w, r, cfg)
				if err != nil {
					return
				}
				go func() {
					for {
						st, err := s.AcceptStream(context.Background())
						if err != nil {
							return
						}
						go func() {
							n, _ := io.Copy(io.Discard, st)
							_ = st.CloseWrite() // the stream ends: ops never pile up against MaxStreams
							done <- n
						}()
					}
				}()
			}))
			defer srv.Close()
			s, err := Dial(context.Background(), "ws://"+strings.TrimPrefix(srv.URL, "http://")+"/", cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			chunk := make([]byte, 32<<10)
			const size = 16 << 20
			b.SetBytes(size)
			b.ReportAllocs()
			cpu0 := processCPU()
			ops := 0
			for b.Loop() {
				ops++
				st, err := s.Open(context.Background(), nil)
				if err != nil {
					b.Fatal(err)
				}
				for left := size; left > 0; left -= len(chunk) {
					if _, err := st.Write(chunk); err != nil {
						b.Fatal(err)
					}
				}
				_ = st.CloseWrite()
				if n := <-done; n != size {
					b.Fatalf("server read %d bytes of %d", n, size)
				}
			}
			// CPU of both ends per MiB: steadier than MB/s on a loaded
			// machine, where time waiting for a core is not CPU.
			b.ReportMetric(float64(processCPU()-cpu0)/1e6/float64(ops*size>>20), "cpu-ms/MiB")
		})
	}
}

// BenchmarkResumeCut is the time from a cut to data flowing again, on
// loopback TCP through a proxy: per op the proxy resets the connection
// (both ends), and the client writes a byte on an echo stream and reads
// its echo, which needs the session resumed (the client notices the
// reset, redials, the server hands the session over, both replay).
// idle: nothing else in flight; bulk: another stream moves data client to
// server all along (the replay carries what was in flight). Besides
// ns/op it reports the p50 and p99 of the ops (p50-ns, p99-ns).
func BenchmarkResumeCut(b *testing.B) {
	for _, bulk := range []bool{false, true} {
		name := "idle"
		if bulk {
			name = "bulk"
		}
		b.Run(name, func(b *testing.B) {
			rs := newResumeServer(b, &ResumeRegistry{}, nil)
			p := newFaultProxy(b, rs.host())
			cfg := DefaultConfig()
			cfg.Resume = true
			s, err := Dial(context.Background(), "ws://"+p.addr()+"/", cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			st, err := s.Open(context.Background(), nil)
			if err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			bulkDone := make(chan error, 1)
			if bulk {
				bst, err := s.Open(context.Background(), nil)
				if err != nil {
					b.Fatal(err)
				}
				go func() { _, _ = io.Copy(io.Discard, bst) }() // the server echoes it back
				go func() {
					chunk := make([]byte, 32<<10)
					for {
						select {
						case <-stop:
							bulkDone <- bst.CloseWrite()
							return
						default:
						}
						if _, err := bst.Write(chunk); err != nil {
							bulkDone <- err
							return
						}
					}
				}()
			}
			one := []byte{'x'}
			got := make([]byte, 1)
			var ops []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				p.cutAll()
				if _, err := st.Write(one); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(st, got); err != nil {
					b.Fatal(err)
				}
				ops = append(ops, time.Since(t0))
			}
			close(stop)
			if bulk {
				if err := <-bulkDone; err != nil {
					b.Fatal(err)
				}
			}
			if cs := s.Stats(); cs.Resumes == 0 || cs.ResumeFailures != 0 {
				b.Fatalf("client stats %+v", cs)
			}
			slices.Sort(ops)
			b.ReportMetric(float64(pct(ops, 50)), "p50-ns")
			b.ReportMetric(float64(pct(ops, 99)), "p99-ns")
		})
	}
}
