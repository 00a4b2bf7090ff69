package mux

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// The event-loop driver's own tests. The session suites run on it too with
// WSMUX_DRIVER=eventloop (make test); these cover what only it does: no
// goroutine per idle session, partial frames and half-written batches
// parked off the workers, its timers, and its fallbacks.

// evCfg returns a copy of cfg (nil: the defaults) that asks for the event
// loop.
func evCfg(cfg *Config) *Config {
	c := cfg.withDefaults()
	c.Driver = DriverEventLoop
	return c
}

func evPair(t testing.TB, ccfg, scfg *Config) (*Session, *Session) {
	t.Helper()
	cs, ss := tcpPair(t, evCfg(ccfg), evCfg(scfg))
	require.NotNil(t, cs.onLoop(), "TCP sessions run on the event loop")
	require.NotNil(t, ss.onLoop())
	return cs, ss
}

// echoOnce writes p on a and reads it back from b, and the reverse.
func echoOnce(t testing.TB, a, b *Stream, p []byte) {
	t.Helper()
	got := make([]byte, len(p))
	_, err := a.Write(p)
	require.NoError(t, err)
	_, err = io.ReadFull(b, got)
	require.NoError(t, err)
	require.Equal(t, p, got)
	_, err = b.Write(p)
	require.NoError(t, err)
	_, err = io.ReadFull(a, got)
	require.NoError(t, err)
	require.Equal(t, p, got)
}

// Idle sessions hold no goroutine: 200 session ends with an open stream
// each, after a byte went both ways, add the loop's few goroutines (the
// poller, the timer wheel, a lingering worker or two), not 2-3 per end as
// the goroutine drivers do.
func TestEventLoopIdleSessionsHoldNoGoroutine(t *testing.T) {
	const pairs = 100
	cs, ss := evPair(t, nil, nil)
	x, y := openPair(t, cs, ss)
	echoOnce(t, x, y, []byte{1}) // the loop is up
	base := runtime.NumGoroutine()
	for range pairs {
		cs, ss := evPair(t, nil, nil)
		a, b := openPair(t, cs, ss)
		echoOnce(t, a, b, []byte{1})
	}
	loop, err := defaultLoop()
	require.NoError(t, err)
	grown := runtime.NumGoroutine() - base
	t.Logf("%d idle session ends: %d more goroutines", 2*pairs, grown)
	require.LessOrEqual(t, grown, 2+loop.pool.Running(), "goroutines that are not the loop's")
}

// TCP and Unix sockets run on the event loop; TLS and pipes fall back to
// DriverFastPaths; every one of them moves checksummed bytes both ways.
func TestEventLoopTransports(t *testing.T) {
	cfg := evCfg(nil)
	pairs := map[string]func(t *testing.T) (net.Conn, net.Conn, bool){
		"tcp": func(t *testing.T) (net.Conn, net.Conn, bool) { a, b := tcpConns(t); return a, b, true },
		"unix": func(t *testing.T) (net.Conn, net.Conn, bool) {
			ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
			require.NoError(t, err)
			defer ln.Close()
			ch := make(chan net.Conn, 1)
			go func() { c, _ := ln.Accept(); ch <- c }()
			a, err := net.Dial("unix", ln.Addr().String())
			require.NoError(t, err)
			return a, <-ch, true
		},
		"pipe": func(t *testing.T) (net.Conn, net.Conn, bool) { a, b := net.Pipe(); return a, b, false },
	}
	for name, pair := range pairs {
		t.Run(name, func(t *testing.T) {
			a, b, polled := pair(t)
			cs, err := Client(a, cfg)
			require.NoError(t, err)
			ss, err := Server(b, cfg)
			require.NoError(t, err)
			defer cs.Close()
			defer ss.Close()
			require.Equal(t, polled, cs.onLoop() != nil)
			require.Equal(t, polled, ss.onLoop() != nil)
			require.Equal(t, !polled, cs.writesDirect(), "the fallback is DriverFastPaths")
			x, y := openPair(t, cs, ss)
			data := make([]byte, 4<<20)
			_, _ = rand.Read(data)
			want := sha256.Sum256(data)
			go func() {
				_, _ = x.Write(data)
				_ = x.CloseWrite()
			}()
			h := sha256.New()
			_, err = io.Copy(h, y)
			require.NoError(t, err)
			require.Equal(t, want[:], h.Sum(nil))
		})
	}
	t.Run("tls", func(t *testing.T) {
		a, b := tcpConns(t)
		cert := selfSigned(t)
		roots := x509.NewCertPool()
		roots.AddCert(cert.Leaf)
		tc := tls.Client(a, &tls.Config{RootCAs: roots, ServerName: "wsmux.test", MinVersion: tls.VersionTLS13})
		ts := tls.Server(b, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
		errc := make(chan error, 1)
		go func() { errc <- ts.Handshake() }()
		require.NoError(t, tc.Handshake())
		require.NoError(t, <-errc)
		cs, err := Client(tc, cfg)
		require.NoError(t, err)
		ss, err := Server(ts, cfg)
		require.NoError(t, err)
		defer cs.Close()
		defer ss.Close()
		require.Nil(t, cs.onLoop(), "TLS is not polled")
		require.True(t, cs.leaderReads(), "the fallback is DriverFastPaths")
		x, y := openPair(t, cs, ss)
		echoOnce(t, x, y, []byte("over TLS"))
	})
}

// Bytes the handshake's reader already buffered are read first.
func TestEventLoopHandshakeBytes(t *testing.T) {
	a, b := tcpConns(t)
	cs, err := Client(a, &Config{Driver: DriverGoroutines})
	require.NoError(t, err)
	defer cs.Close()
	br := bufio.NewReader(b)
	_, err = br.Peek(1) // the client's preface is buffered now
	require.NoError(t, err)
	require.Positive(t, br.Buffered())
	ss, err := NewSession(b, br, false, evCfg(nil))
	require.NoError(t, err)
	defer ss.Close()
	require.NotNil(t, ss.onLoop())
	st, err := cs.OpenEarly(nil)
	require.NoError(t, err)
	_, err = st.Write([]byte("early bytes"))
	require.NoError(t, err)
	peer, err := ss.AcceptStream(context.Background())
	require.NoError(t, err)
	got := make([]byte, 11)
	_, err = io.ReadFull(peer, got)
	require.NoError(t, err)
	require.Equal(t, "early bytes", string(got))
	echoOnce(t, st, peer, []byte("and after"))
}

// A peer that stops inside a message or dribbles it a byte at a time: the
// session ends with KEEPALIVE_TIMEOUT once ReadTimeout passed since the
// message's first byte (the partial frame parks in the parser; no worker
// waits for it).
func TestEventLoopStopsMidFrame(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	data := appendOK(frame.AppendData(nil, 2, false, make([]byte, 16<<10)))
	hdr := func(length int) []byte {
		var w sliceWriter
		require.NoError(t, ws.WriteHeader(&w, ws.Header{Fin: true, OpCode: ws.OpBinary, Length: int64(length)}))
		return w.b
	}
	tests := []struct {
		name    string
		start   []byte
		dribble bool
	}{
		{name: "mid WebSocket header", start: []byte{0x82}},
		{name: "mid mux DATA payload", start: append(hdr(len(data)), data[:12+1000]...)},
		{name: "dribbling", start: append(hdr(len(data)), data[:1]...), dribble: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tcpConns(t)
			cs, err := Client(a, evCfg(&Config{KeepAliveInterval: -1, ReadTimeout: readTimeout}))
			require.NoError(t, err)
			require.NotNil(t, cs.onLoop())
			peer := newRawPeer(t, b, false)
			wire := peer.observe(false)
			require.NoError(t, peer.send(synFrame(settingsMsg(), 2)))
			start := time.Now()
			_, err = b.Write(tt.start)
			require.NoError(t, err)
			stop := make(chan struct{})
			dribbled := make(chan struct{})
			go func() {
				defer close(dribbled)
				if !tt.dribble {
					return
				}
				tick := time.NewTicker(10 * time.Millisecond) // the peer's script, not a wait
				defer tick.Stop()
				for _, c := range data[1:] {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := b.Write([]byte{c}); err != nil {
						return
					}
				}
			}()
			<-cs.CloseChan()
			require.GreaterOrEqual(t, time.Since(start), readTimeout, "%v", cs.Err())
			requireHostileEnd(t, cs, wire, frame.KeepaliveTimeout)
			close(stop)
			<-dribbled
		})
	}
}

// Peers that stop reading: their sessions' batches park half-written on
// full sockets without holding a worker (more stalled sessions than
// workers, while another session still echoes), Writes stop at the send
// buffers and time out, and each stalled session ends with STALL_TIMEOUT
// once WriteTimeout passed without write progress.
func TestEventLoopPeerStopsReading(t *testing.T) {
	loop, err := defaultLoop()
	require.NoError(t, err)
	stalled := 2*loop.pool.Running() + 5
	const writeTimeout = 500 * time.Millisecond
	type victim struct {
		s    *Session
		peer net.Conn
	}
	var vs []victim
	for range stalled {
		a, b := tcpConns(t)
		require.NoError(t, b.(*net.TCPConn).SetReadBuffer(4<<10))
		require.NoError(t, a.(*net.TCPConn).SetWriteBuffer(4<<10))
		cs, err := Client(a, evCfg(&Config{KeepAliveInterval: -1, WriteTimeout: writeTimeout}))
		require.NoError(t, err)
		require.NotNil(t, cs.onLoop())
		peer := newRawPeer(t, b, false)
		require.NoError(t, peer.send(settingsMsg()))
		vs = append(vs, victim{cs, b})
	}
	start := time.Now()
	big := make([]byte, 8<<20)
	for _, v := range vs {
		st, err := v.s.OpenEarly(nil)
		require.NoError(t, err)
		require.NoError(t, st.SetWriteDeadline(time.Now().Add(writeTimeout/2)))
		n, err := st.Write(big)
		require.ErrorIs(t, err, ErrTimeout)
		require.Less(t, n, len(big), "the send buffers bound what a Write queues")
	}
	// The loop still serves others while those batches are parked.
	cs, ss := evPair(t, nil, nil)
	x, y := openPair(t, cs, ss)
	echoOnce(t, x, y, []byte("still served"))
	for _, v := range vs {
		<-v.s.CloseChan()
		var se *SessionError
		require.ErrorAs(t, v.s.Err(), &se)
		require.Equal(t, frame.StallTimeout, se.Code, "%v", se)
		require.False(t, se.Remote)
		<-v.s.Done()
		_ = v.peer.Close()
	}
	require.GreaterOrEqual(t, time.Since(start), writeTimeout)
}

// Close ends an event-loop session whose peer stopped reading within
// CloseTimeout, and the connection is closed.
func TestEventLoopCloseStalled(t *testing.T) {
	a, b := tcpConns(t)
	require.NoError(t, b.(*net.TCPConn).SetReadBuffer(4<<10))
	require.NoError(t, a.(*net.TCPConn).SetWriteBuffer(4<<10))
	cs, err := Client(a, evCfg(&Config{KeepAliveInterval: -1, CloseTimeout: 300 * time.Millisecond}))
	require.NoError(t, err)
	peer := newRawPeer(t, b, false)
	require.NoError(t, peer.send(settingsMsg()))
	st, err := cs.OpenEarly(nil)
	require.NoError(t, err)
	require.NoError(t, st.SetWriteDeadline(time.Now().Add(100*time.Millisecond)))
	_, err = st.Write(make([]byte, 4<<20))
	require.ErrorIs(t, err, ErrTimeout)
	require.NoError(t, cs.Close())
	<-cs.Done()
	_, err = a.Write([]byte{0})
	require.ErrorIs(t, err, net.ErrClosed)
	_ = b.Close()
}

// The peer's WebSocket close is answered and ends the session; pings are
// answered with pongs carrying their payload.
func TestEventLoopWebSocketControl(t *testing.T) {
	a, b := tcpConns(t)
	cs, err := Client(a, evCfg(&Config{KeepAliveInterval: -1}))
	require.NoError(t, err)
	peer := newRawPeer(t, b, false)
	require.NoError(t, peer.send(settingsMsg()))
	ping := append(hdrBytes(t, ws.Header{Fin: true, OpCode: ws.OpPing, Length: 4}), "abcd"...)
	closeBody := ws.NewCloseFrameBody(ws.StatusGoingAway, "bye")
	closeFrame := append(hdrBytes(t, ws.Header{Fin: true, OpCode: ws.OpClose, Length: int64(len(closeBody))}), closeBody...)
	_, err = b.Write(append(ping, closeFrame...))
	require.NoError(t, err)
	// The raw reader sees the session's frames; read the pong and close.
	var pong []byte
	var closeCode ws.StatusCode
	for closeCode == 0 {
		h, err := ws.ReadHeader(b)
		require.NoError(t, err)
		p := make([]byte, h.Length)
		_, err = io.ReadFull(b, p)
		require.NoError(t, err)
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		switch h.OpCode {
		case ws.OpPong:
			pong = p
		case ws.OpClose:
			closeCode, _ = ws.ParseCloseFrameData(p)
		}
	}
	require.Equal(t, "abcd", string(pong))
	require.Equal(t, ws.StatusGoingAway, closeCode, "the close is echoed")
	<-cs.Done()
	var se *SessionError
	require.ErrorAs(t, cs.Err(), &se)
	require.True(t, se.Remote)
	_ = b.Close()
}

func hdrBytes(t *testing.T, h ws.Header) []byte {
	var w sliceWriter
	require.NoError(t, ws.WriteHeader(&w, h))
	return w.b
}

func TestDriverEventLoopName(t *testing.T) {
	require.Equal(t, "eventloop", DriverEventLoop.String())
	require.NoError(t, (&Config{Driver: DriverEventLoop}).Validate())
	require.Equal(t, DriverEventLoop, DriverEventLoop.resolve())
}
