package engine

import (
	"testing"
	"time"
)

// BenchmarkPairBulk measures what resumption costs the engine alone: one
// stream moves 1 MiB per op from client to server through appendBatch and
// Feed (each batch fed straight to the peer, buffers reused), with
// resumption off and on (on: every batch is copied into the retained
// messages, RECEIVED frames go back and are applied). testConfig's
// windows and batch size.
func BenchmarkPairBulk(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			cfg := testConfig()
			cfg.Resume = on
			c, s := New(cfg, true, nil, 0), New(cfg, false, nil, 0)
			var now time.Duration
			bufC, bufS := make([]byte, 0, cfg.MaxBatch+64), make([]byte, 0, cfg.MaxBatch+64)
			exchange := func() {
				out := c.appendBatch(bufC[:0], now)
				if len(out) > 0 {
					if err := s.Feed(out, now); err != nil {
						b.Fatal(err)
					}
				}
				out = s.appendBatch(bufS[:0], now)
				if len(out) > 0 {
					if err := c.Feed(out, now); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := s.Feed(c.appendBatch(c.appendPreface(bufC[:0], 0), 0), 0); err != nil {
				b.Fatal(err)
			}
			if err := c.Feed(s.appendBatch(s.appendPreface(bufS[:0], 0), 0), 0); err != nil {
				b.Fatal(err)
			}
			st := c.Open(nil, 0)
			exchange()
			dst := s.Accept()
			if dst == nil {
				b.Fatal("no stream")
			}
			src := make([]byte, 1<<20)
			buf := make([]byte, 256<<10)
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				left, got := src, 0
				for got < len(src) {
					if len(left) > 0 {
						n, _, err := c.Write(st, left)
						if err != nil {
							b.Fatal(err)
						}
						left = left[n:]
					}
					exchange()
					for {
						n, _, _ := s.Read(dst, buf, now)
						if n == 0 {
							break
						}
						got += n
					}
					exchange()
					now += time.Millisecond
				}
			}
			b.StopTimer()
			if on && (!c.ResumeInEffect() || c.RetainedBytes() > 2*cfg.MaxBatch+ackEvery) {
				b.Fatalf("in effect %v, retained %d", c.ResumeInEffect(), c.RetainedBytes())
			}
		})
	}
}
