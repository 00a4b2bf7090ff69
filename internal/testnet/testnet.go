// Package testnet holds the small network helpers of wsmux's command tests:
// TCP servers on loopback, a dial that waits for a listener,
// goroutine-safe output capture, and running commands such as kubectl
// (its exit code, its port-forwards, an echo through them).
//
// Tests only: it imports testing and internal/resetproxy, and no non-test
// package may import it (scripts/check-layers.sh).
package testnet

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"
)

// Serve runs handle for every connection to a new loopback listener until
// t's cleanup, which waits for the handlers; it returns the address.
func Serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	return ln.Addr().String()
}

// Echo starts a TCP echo server that half-closes after the client's EOF.
func Echo(t testing.TB) string {
	return Serve(t, func(c net.Conn) {
		_, _ = io.Copy(c, c)
		_ = c.(*net.TCPConn).CloseWrite()
	})
}

// Dial dials addr, retrying for up to 10 s while nothing listens yet.
func Dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Buffer is a goroutine-safe bytes.Buffer for captured output.
type Buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed by the next Write (Await)
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

// Await returns once substr has been written, waking at each Write; it
// fails t if that takes longer than timeout.
func (s *Buffer) Await(t testing.TB, substr string, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if strings.Contains(s.b.String(), substr) {
			s.mu.Unlock()
			return
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%q not written within %v:\n%s", substr, timeout, s.String())
		}
	}
}

// String returns what was written so far.
func (s *Buffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// LogWriter writes each write as a test log line (for slog handlers).
type LogWriter struct{ T testing.TB }

func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// IgnoredGoroutines are the background goroutines of client-go, klog,
// net/http keep-alives and spdystream that may outlive a test.
func IgnoredGoroutines() []leakcheck.Option {
	return []leakcheck.Option{
		leakcheck.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		// spdystream's Close leaves a shutdown goroutine that waits (up to
		// its close timeout) for the peer's last frames.
		leakcheck.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown"),
		leakcheck.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown.func1"),
		leakcheck.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		leakcheck.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		leakcheck.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
	}
}
