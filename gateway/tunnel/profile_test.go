package tunnel

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

// The tunnel profile (docs/spec/wsmux-tunnel-v1.md), tried from the client
// side of the wire with a bare mux session.

func dialSession(t *testing.T, e *env) *mux.Session {
	t.Helper()
	s, err := (&mux.Dialer{Header: http.Header{"Authorization": {"Bearer " + testToken}}}).Dial(context.Background(), wsURL(t, e.hs.URL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestProfileTargetHeader: the answer to each SYN follows the profile: one
// Target field of HOST:PORT with a decimal port 1..65535 (spaces around it
// ignored, the host compared in lower case, the port as a number), or
// BAD_REQUEST; then TARGET_NOT_ALLOWED, TARGET_DIAL_FAILED, or the ACK. Two
// Target fields used to take the first, a service name as the port was
// looked up, and a port with a leading zero was compared as written.
func TestProfileTargetHeader(t *testing.T) {
	target := echoServer(t)
	host, port, _ := net.SplitHostPort(target)
	closed := func() string { // a port nothing listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := ln.Addr().String()
		ln.Close()
		return a
	}()
	_, closedPort, _ := net.SplitHostPort(closed)
	e := startServer(t, target, closed, "localhost:"+closedPort)
	s := dialSession(t, e)
	for _, tc := range []struct {
		name string
		h    http.Header
		code frame.ErrorCode // 0: accepted
	}{
		{"allowed", http.Header{TargetHeader: {target}}, 0},
		{"spaces, leading zeros", http.Header{TargetHeader: {"  " + host + ":00" + port + "\t"}}, 0},
		{"host in upper case", http.Header{TargetHeader: {"LOCALHOST:" + closedPort}}, CodeDialFailed},
		{"no target", nil, CodeBadRequest},
		{"empty", http.Header{TargetHeader: {""}}, CodeBadRequest},
		{"no port", http.Header{TargetHeader: {host}}, CodeBadRequest},
		{"port 0", http.Header{TargetHeader: {host + ":0"}}, CodeBadRequest},
		{"port 65536", http.Header{TargetHeader: {host + ":65536"}}, CodeBadRequest},
		{"service name", http.Header{TargetHeader: {"localhost:http"}}, CodeBadRequest},
		{"signed port", http.Header{TargetHeader: {host + ":+" + port}}, CodeBadRequest},
		{"two targets", http.Header{TargetHeader: {target, target}}, CodeBadRequest},
		{"not allowed", http.Header{TargetHeader: {host + ":1"}}, CodeNotAllowed},
		{"dial fails", http.Header{TargetHeader: {closed}}, CodeDialFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			st, err := s.Open(ctx, tc.h)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if _, err := st.Write([]byte("ping")); err != nil {
					t.Fatal(err)
				}
				_ = st.CloseWrite()
				if got, err := io.ReadAll(st); err != nil || string(got) != "ping" {
					t.Fatalf("echo %q, %v", got, err)
				}
				return
			}
			var se *mux.StreamError
			if !errors.As(err, &se) || se.Code != tc.code {
				t.Fatalf("Open: %v, want a refusal with %s", err, CodeName(tc.code))
			}
		})
	}
}

// TestProfileStopSending: a client that stops reading a stream (CloseRead:
// STOP_SENDING) gets a FIN, and its own direction goes on to the target,
// half-close included; the server discards what the target still sends.
// The server used to answer with RST_STREAM(CONNECTION_RESET) as soon as
// the target sent anything, which ended the client's direction too.
func TestProfileStopSending(t *testing.T) {
	type result struct {
		n   int64
		err error
	}
	got := make(chan result, 1)
	target := tcpServer(t, func(c net.Conn) {
		defer c.Close()
		// Echo everything (the target keeps talking) and count what came.
		n, err := io.Copy(c, c)
		got <- result{n, err}
	})
	e := startServer(t, target)
	s := dialSession(t, e)
	st, err := s.Open(context.Background(), http.Header{TargetHeader: {target}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseRead(); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, echoed by the target as it comes
	for off := 0; off < len(data); off += 32 << 10 {
		if _, err := st.Write(data[off : off+32<<10]); err != nil {
			t.Fatalf("write after STOP_SENDING at %d: %v (the server must not reset the stream)", off, err)
		}
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || r.n != int64(1+len(data)) {
			t.Fatalf("the target got %d bytes (%v), want %d and a clean end", r.n, r.err, 1+len(data))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the target never saw the client's FIN")
	}
	if _, err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().ResetsRemote; n != 0 {
		t.Fatalf("%d streams reset by the server", n)
	}
	// The server's FIN answered the STOP_SENDING long before the PING's
	// answer, which came after it on the same connection: the stream has
	// ended both ways.
	if n := s.NumStreams(); n != 0 {
		t.Fatalf("%d streams left after the PING's answer", n)
	}
}

// TestProfileStopSendingLinger: after STOP_SENDING and the end of the
// client's direction, a target that talks on and never closes is read and
// discarded for stopLinger, then its connection is closed: the tunnel holds
// it no longer than that.
func TestProfileStopSendingLinger(t *testing.T) {
	defer func(d time.Duration) { stopLinger = d }(stopLinger)
	stopLinger = 200 * time.Millisecond
	ended := make(chan error, 1)
	target := tcpServer(t, func(c net.Conn) {
		defer c.Close()
		// Talk without end; never read the FIN.
		chunk := make([]byte, 32<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				ended <- err
				return
			}
		}
	})
	e := startServer(t, target)
	s := dialSession(t, e)
	st, err := s.Open(context.Background(), http.Header{TargetHeader: {target}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseRead(); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-ended:
		d := time.Since(start)
		t.Logf("the target's writes ended after %v: %v", d.Round(time.Millisecond), err)
		if d < stopLinger/2 {
			t.Errorf("the tunnel closed the target's connection after %v, before the linger (%v): bytes the target had not read yet could be lost", d, stopLinger)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel still held the target's connection 10 s after the linger")
	}
}
