package resetproxy

import (
	"io"
	"net"
	"testing"
)

// echoTarget starts a TCP server that echoes every connection until it
// ends, then sends how it ended to ended (if not nil); it returns its
// address.
func echoTarget(t *testing.T, ended chan<- error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, err := io.Copy(c, c) // echo until the proxy resets us
				if ended != nil {
					ended <- err
				}
				_ = c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// TestResetEndsBothSides: bytes pass through; after Cut the client's
// Read fails and the target sees its connection end; new connections are
// accepted until StopAccepting.
func TestCutEndsBothSides(t *testing.T) {
	ended := make(chan error, 2)
	p, err := Listen(echoTarget(t, ended))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for round := range 2 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatalf("round %d: dial through the proxy: %v", round, err)
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("round %d: echo %q, %v", round, buf, err)
		}
		p.Cut()
		if _, err := c.Read(buf); err == nil {
			t.Fatalf("round %d: Read after Cut succeeded", round)
		}
		<-ended // the target's side ended too
		_ = c.Close()
	}
	p.StopAccepting()
	c, err := net.Dial("tcp", p.Addr())
	if err == nil {
		// The port may still accept at the kernel level for a moment on
		// some systems; nothing answers behind it.
		_, err = c.Read(make([]byte, 1))
		_ = c.Close()
	}
	if err == nil {
		t.Fatal("a connection through a proxy that stopped accepting worked")
	}
}

// TestCutEveryCountsOnce: with bytes moving both ways at once, each cut
// offset is taken once: the proxy never cuts (or counts) more than max
// times, however the two directions' pipes interleave. Before the
// decision and the count were made together, both pipes could take the
// same offset and the last cut counted twice (1 run of 200 of this test;
// TestForwardResumesAfterCuts saw "4 cuts, want 3" in CI).
func TestCutEveryCountsOnce(t *testing.T) {
	p, err := Listen(echoTarget(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const max = 3
	p.CutEvery(48<<10, max)
	buf, rbuf := make([]byte, 64<<10), make([]byte, 1024) // buf is only ever read: writers share it
	for p.Cuts() < max {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		// Write and read at once until the cut ends the connection.
		go func() {
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
	}
	for range 20 { // more connections: no cut past max
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(buf[:1024]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, rbuf); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	if got := p.Cuts(); got != max {
		t.Fatalf("%d cuts, want %d", got, max)
	}
}
