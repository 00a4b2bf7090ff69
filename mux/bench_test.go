package mux

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
)

// BenchmarkThroughput moves 32 KiB writes over loopback TCP, spread over
// N concurrent streams, client to server.
func BenchmarkThroughput(b *testing.B) {
	for _, n := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			cfg := &Config{MaxStreams: 2 * n, AcceptBacklog: 2 * n}
			cs, ss := tcpPair(b, cfg, cfg)
			var ws, rs []*Stream
			for i := 0; i < n; i++ {
				w, r := openPair(b, cs, ss)
				ws, rs = append(ws, w), append(rs, r)
			}
			const size = 32 << 10
			msg := make([]byte, size)
			var rwg sync.WaitGroup
			for _, r := range rs {
				rwg.Add(1)
				go func() {
					defer rwg.Done()
					_, _ = io.Copy(io.Discard, r)
				}()
			}
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			var wwg sync.WaitGroup
			for i, w := range ws {
				ops := b.N / n
				if i < b.N%n {
					ops++
				}
				wwg.Add(1)
				go func() {
					defer wwg.Done()
					for j := 0; j < ops; j++ {
						if _, err := w.Write(msg); err != nil {
							b.Error(err)
							return
						}
					}
					_ = w.CloseWrite()
				}()
			}
			wwg.Wait()
			rwg.Wait()
			b.StopTimer()
		})
	}
}

// BenchmarkEcho64 is the round trip of a 64-byte write echoed back.
func BenchmarkEcho64(b *testing.B) {
	cs, ss := tcpPair(b, nil, nil)
	w, r := openPair(b, cs, ss)
	go func() {
		_, _ = io.Copy(r, r)
		_ = r.Close()
	}()
	msg := make([]byte, 64)
	buf := make([]byte, 64)
	b.SetBytes(64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(w, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = w.Close()
}

// BenchmarkOpenClose opens a stream, waits for its acceptance and ends it
// both ways.
func BenchmarkOpenClose(b *testing.B) {
	cs, ss := tcpPair(b, nil, nil)
	go func() {
		for {
			st, err := ss.AcceptStream(context.Background())
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(io.Discard, st)
				_ = st.Close()
			}()
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := cs.Open(context.Background(), nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = st.Close()
		if _, err := io.Copy(io.Discard, st); err != nil {
			b.Fatal(err)
		}
	}
}
