package mux

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkResumeBulk is the cost of resumption on a bulk transfer over
// loopback TCP (Dial and Upgrade, one stream, 16 MiB client to server per
// op): off, and on (every batch retained until acknowledged, RECEIVED
// frames back, the goroutine driver that resumption requires). Compare
// with DriverGoroutines off to see retention alone.
func BenchmarkResumeBulk(b *testing.B) {
	for _, bc := range []struct {
		name   string
		resume bool
		drv    Driver
	}{
		{"off", false, DriverFastPaths},
		{"off-goroutines", false, DriverGoroutines},
		{"on", true, DriverGoroutines},
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
			buf := make([]byte, 256<<10)
			const size = 16 << 20
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				st, err := s.Open(context.Background(), nil)
				if err != nil {
					b.Fatal(err)
				}
				for left := size; left > 0; left -= len(buf) {
					if _, err := st.Write(buf[:min(left, len(buf))]); err != nil {
						b.Fatal(err)
					}
				}
				_ = st.CloseWrite()
				if n := <-done; n != size {
					b.Fatal(errors.New("short transfer"))
				}
			}
		})
	}
}
