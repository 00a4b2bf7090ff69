package bench

import (
	"bytes"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// The link emulator on the virtual clock of testing/synctest, over net.Pipe
// (whose blocking synctest can see through): every delay and rate below is
// checked to the nanosecond, no real time passes.

// linkPipe returns the two outer ends of client <-> link <-> server.
func linkPipe(t *testing.T, cfg LinkConfig) (client, server net.Conn, l *Link, wait func()) {
	t.Helper()
	l, err := NewLink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, a := net.Pipe()
	b, s := net.Pipe()
	wait = l.Connect(a, b)
	t.Cleanup(func() {
		c.Close()
		s.Close()
		wait()
	})
	return c, s, l, wait
}

// arrival writes msg on w at the current (virtual) time and returns how long
// it took to read all of it on r.
func arrival(t *testing.T, w, r net.Conn, msg []byte) time.Duration {
	t.Helper()
	start := time.Now()
	go w.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("link corrupted the bytes")
	}
	return time.Since(start)
}

func TestLinkDelayAndRate(t *testing.T) {
	const rate = 1_000_000 // 1 MB/s: 1 µs per byte
	tests := []struct {
		name string
		cfg  LinkConfig
		size int
		want time.Duration
	}{
		{"delay only", LinkConfig{Delay: 40 * time.Millisecond}, 100, 40 * time.Millisecond},
		{"delay and serialisation", LinkConfig{Delay: 10 * time.Millisecond, Rate: rate}, 1000, 10*time.Millisecond + 1000*time.Microsecond},
		// 1 MiB at 1 MB/s takes 1.048576 s whatever the reads' sizes.
		{"rate bounds a bulk transfer", LinkConfig{Delay: 5 * time.Millisecond, Rate: rate}, 1 << 20, 5*time.Millisecond + (1<<20)*time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, s, _, _ := linkPipe(t, tt.cfg)
				if got := arrival(t, c, s, payload[:tt.size]); got != tt.want {
					t.Errorf("c->s took %v, want %v", got, tt.want)
				}
				// The other direction alike.
				if got := arrival(t, s, c, payload[:tt.size]); got != tt.want {
					t.Errorf("s->c took %v, want %v", got, tt.want)
				}
			})
		})
	}
}

// A stall holds back what would leave during it; a byte sent between stalls
// only sees the delay.
func TestLinkStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := LinkConfig{Delay: 10 * time.Millisecond, StallEvery: 100 * time.Millisecond, StallFor: 30 * time.Millisecond}
		c, s, _, _ := linkPipe(t, cfg)
		msg := []byte("x")
		if got := arrival(t, c, s, msg); got != cfg.Delay {
			t.Errorf("before the first stall: %v, want %v", got, cfg.Delay)
		}
		time.Sleep(100*time.Millisecond - cfg.Delay + 5*time.Millisecond) // virtual: t = 105 ms, 5 ms into the stall
		if got, want := arrival(t, c, s, msg), 25*time.Millisecond+cfg.Delay; got != want {
			t.Errorf("during the stall: %v, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond) // virtual: t = 190 ms, between stalls
		if got := arrival(t, c, s, msg); got != cfg.Delay {
			t.Errorf("after the stall: %v, want %v", got, cfg.Delay)
		}
	})
}

// A receiver that never reads: the relay holds Rate x Delay + Queue, plus
// what the blocked write to the receiver has taken, and no more; the sender
// blocks there.
func TestLinkBoundsWhatItHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := LinkConfig{Delay: 10 * time.Millisecond, Rate: 10_000_000, Queue: 64 << 10}
		c, _, _, _ := linkPipe(t, cfg)
		var sent int
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				n, err := c.Write(payload[:4096])
				sent += n
				if err != nil {
					return
				}
			}
		}()
		time.Sleep(time.Second) // virtual: lets the bubble's clock run far past what the link needs
		synctest.Wait()
		limit := int(cfg.buffer())
		if sent < limit-4096 || sent > limit {
			t.Errorf("the link took %d bytes from a sender whose receiver never reads; want about %d (Rate x Delay + Queue)", sent, limit)
		}
		c.Close()
		<-done
	})
}

// The sender's end of file arrives after the delay, and ends the relay.
func TestLinkEOF(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, _, wait := linkPipe(t, LinkConfig{Delay: 20 * time.Millisecond})
		start := time.Now()
		c.Close()
		if _, err := s.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read after the sender closed: %v, want io.EOF", err)
		}
		if got := time.Since(start); got != 20*time.Millisecond {
			t.Errorf("EOF after %v, want 20ms", got)
		}
		s.Close()
		wait()
	})
}

func TestLinkConfigValidate(t *testing.T) {
	tests := []struct {
		cfg LinkConfig
		ok  bool
	}{
		{LinkConfig{Delay: 40 * time.Millisecond, Rate: 125e6}, true},
		{LinkConfig{Delay: -1}, false},
		{LinkConfig{Rate: -1}, false},
		{LinkConfig{StallEvery: time.Second, StallFor: time.Second}, false},
		{LinkConfig{Delay: 10 * time.Second, Rate: 125e6}, false}, // 1.25 GB per connection
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v: Validate = %v, want ok=%v", tt.cfg, err, tt.ok)
		}
		if _, err := NewLink(tt.cfg); (err == nil) != tt.ok {
			t.Errorf("%+v: NewLink = %v, want ok=%v", tt.cfg, err, tt.ok)
		}
	}
}
