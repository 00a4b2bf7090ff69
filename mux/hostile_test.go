package mux

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gobwas/ws"
	"github.com/wsmux/wsmux/internal/testkit/leakcheck"
	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// Hostile peers (docs/spec/wsmux-v1.md section 11). The one-message
// violations are rows of TestPeerViolations (violation_test.go); the tests
// here need time, work accounting, or a peer that does not read:
//
//	TestHostileRapidReset       rapid open+reset (CVE-2023-44487)         ENHANCE_YOUR_CALM, bounded handler calls
//	TestHostilePingNoRead       pings, never reads the ACKs (CVE-2019-9512) ENHANCE_YOUR_CALM, 32 ACKs queued at most
//	TestHostileUrgentQueue      induced RSTs pile up unread (x/net maxQueuedControlFrames) ENHANCE_YOUR_CALM
//	TestHostileNeverGrants      reads, never returns credit (CVE-2019-9517) Writes time out per stream, heap flat, STALL_TIMEOUT
//	TestHostileNeverReadsSocket reads nothing at all                     Writes time out, heap flat, STALL_TIMEOUT (write timeout)
//	TestHostileStopsMidFrame    stops or dribbles mid-message (slowloris) KEEPALIVE_TIMEOUT after ReadTimeout

// wireLog is what a raw peer saw the session send.
type wireLog struct {
	frames    []frame.Header // every mux frame, in order
	closeCode ws.StatusCode  // the WebSocket close status (0: no close came)
}

func (l *wireLog) count(typ frame.Type, flags frame.Flags) int {
	n := 0
	for _, h := range l.frames {
		if h.Type == typ && h.Flags == flags {
			n++
		}
	}
	return n
}

func (l *wireLog) goaways() []frame.ErrorCode {
	var codes []frame.ErrorCode
	for _, h := range l.frames {
		if h.Type == frame.TypeGoAway {
			codes = append(codes, h.Code())
		}
	}
	return codes
}

// observe reads everything the session sends until the connection ends,
// then closes it and reports. With ackPings the peer answers the session's
// PINGs (it is alive); otherwise it only reads.
func (p *rawPeer) observe(ackPings bool) <-chan wireLog {
	ch := make(chan wireLog, 1)
	go func() {
		var l wireLog
		defer func() {
			_ = p.conn.Close()
			ch <- l
		}()
		for {
			msg, err := p.ws.ReadMessage()
			if err != nil {
				var ce *wsio.CloseError
				if errors.As(err, &ce) {
					l.closeCode = ce.Code
				}
				return
			}
			var it frame.Iterator
			it.Reset(msg, frame.DefaultLimits())
			for it.Next() {
				f := it.Frame()
				l.frames = append(l.frames, f.Header)
				if ackPings && f.Type == frame.TypePing && f.Flags == 0 {
					_ = p.send(frame.AppendPing(nil, true, f.Arg))
				}
			}
		}
	}()
	return ch
}

// requireHostileEnd waits for s to end after a peer's abuse and checks the
// documented outcome: Err is a local *SessionError with code, one GOAWAY
// with that code is the last frame on the wire, the WebSocket close with
// the matching status follows, and the session's goroutines finish.
func requireHostileEnd(t *testing.T, s *Session, wire <-chan wireLog, code frame.ErrorCode) wireLog {
	t.Helper()
	// Each wait below is for an end the abuse must bring: a session that
	// survives hangs the test (in a synctest bubble: a deadlock panic).
	<-s.CloseChan()
	var se *SessionError
	require.ErrorAs(t, s.Err(), &se)
	require.Equal(t, code, se.Code, "%v", se)
	require.False(t, se.Remote)
	require.NotZero(t, s.Stats().Errors[code])
	l := <-wire // the connection is closed
	require.Equal(t, []frame.ErrorCode{code}, l.goaways(), "one GOAWAY, with the session's code")
	require.Equal(t, frame.TypeGoAway, l.frames[len(l.frames)-1].Type, "GOAWAY is the last frame")
	require.Equal(t, wsCloseCode(se), l.closeCode, "WebSocket close status")
	<-s.Done() // the session's goroutines finish
	require.NoError(t, s.Close())
	return l
}

func settingsMsg() []byte {
	var s frame.Settings
	return frame.AppendSettings(nil, &s)
}

// TestHostileRapidReset: CVE-2023-44487 (Go CVE-2023-39325). The peer
// opens and at once resets streams, 10,000 times. The work it causes is
// bounded: at most maxYoungResets+1 streams are created and handled, then
// GOAWAY ENHANCE_YOUR_CALM; the rest of its frames are not processed.
func TestHostileRapidReset(t *testing.T) {
	const attempts = 10000
	for _, withHandler := range []bool{true, false} {
		name := "accept queue"
		if withHandler {
			name = "handler"
		}
		t.Run(name, func(t *testing.T) {
			defer leakcheck.VerifyNone(t, leakcheck.IgnoreCurrent())
			var handled, accepted atomic.Int64
			cfg := &Config{MaxStreams: 2 * attempts, AcceptBacklog: 2 * attempts}
			if withHandler {
				cfg.Handler = func(*Stream) error {
					handled.Add(1)
					return nil
				}
			}
			a, b := net.Pipe()
			cs, err := Client(a, cfg)
			require.NoError(t, err)
			defer cs.Close()
			if !withHandler {
				go func() {
					for {
						if _, err := cs.AcceptStream(context.Background()); err != nil {
							return
						}
						accepted.Add(1)
					}
				}()
			}
			peer := newRawPeer(t, b, false)
			wire := peer.observe(false)
			go func() {
				if peer.send(settingsMsg()) != nil {
					return
				}
				id := uint32(2)
				for sent := 0; sent < attempts; {
					var msg []byte
					for i := 0; i < 100; i++ {
						msg = synFrame(msg, id)
						msg = appendOK(frame.AppendRSTStream(msg, id, frame.Cancel, ""))
						id += 2
						sent++
					}
					if peer.send(msg) != nil {
						return
					}
				}
			}()
			requireHostileEnd(t, cs, wire, frame.EnhanceYourCalm)
			bound := int64(maxYoungResets + 1)
			require.LessOrEqual(t, int64(cs.Stats().StreamsAccepted), bound, "streams created")
			require.LessOrEqual(t, handled.Load(), bound, "handler calls")
			require.LessOrEqual(t, accepted.Load(), bound, "streams accepted")
			require.Equal(t, uint64(maxYoungResets), cs.Stats().ResetsRemote, "resets processed before the budget ran out")
		})
	}
}

// TestHostilePingNoRead: CVE-2019-9512 with a peer that pings within the
// rate budget but never reads our answers. At most maxQueuedPingAcks
// answers queue; the next PING ends the session with ENHANCE_YOUR_CALM,
// and the queued answers are dropped, not written.
func TestHostilePingNoRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, &Config{KeepAliveInterval: -1})
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		require.NoError(t, peer.send(settingsMsg()))
		start := time.Now()
		sent := 0
	loop:
		for {
			select {
			case <-cs.CloseChan():
				break loop
			case <-time.After(200 * time.Millisecond): // 5/s: within the token bucket
			}
			sent++
			require.NoError(t, peer.send(frame.AppendPing(nil, false, uint32(sent))))
		}
		require.Equal(t, maxQueuedPingAcks+1, sent)
		require.Equal(t, time.Duration(sent)*200*time.Millisecond, time.Since(start))
		// Now read: the write that was stuck completes, then the GOAWAY.
		l := requireHostileEnd(t, cs, peer.observe(false), frame.EnhanceYourCalm)
		require.Zero(t, l.count(frame.TypePing, frame.FlagACK), "queued PING ACKs must be dropped")
		_ = b.Close()
	})
}

// TestHostileUrgentQueue: answers the peer induces but does not read are
// bounded (x/net/http2's maxQueuedControlFrames). The peer never reads and
// opens, within the credit it was granted, streams nobody accepts: each is
// refused with RST_STREAM(REFUSED_STREAM); at maxUrgent queued answers the
// session ends with ENHANCE_YOUR_CALM.
func TestHostileUrgentQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, &Config{AcceptBacklog: 1, MaxStreams: 2 * maxUrgent, WriteTimeout: 10 * time.Minute})
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		require.NoError(t, peer.send(settingsMsg()))
		id := uint32(0)
		require.NoError(t, peer.send(repeatFrames(2*maxUrgent, func(b []byte) []byte { id += 2; return synFrame(b, id) })))
		<-cs.CloseChan()
		require.ErrorContains(t, cs.Err(), "urgent queue")
		requireHostileEnd(t, cs, peer.observe(false), frame.EnhanceYourCalm)
		_ = b.Close()
	})
}

// heapInuse returns the heap in use after a full collection.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// writeTimesOut writes big to st with a write deadline d from now and
// checks the Write ends by the deadline with ErrTimeout, returning n.
func writeTimesOut(t *testing.T, st *Stream, big []byte, d time.Duration) int {
	t.Helper()
	require.NoError(t, st.SetWriteDeadline(time.Now().Add(d)))
	start := time.Now()
	n, err := st.Write(big)
	require.ErrorIs(t, err, ErrTimeout)
	require.Equal(t, d, time.Since(start), "the Write ends at its deadline")
	return n
}

// TestHostileNeverGrants: slow read / zero window (CVE-2019-9517). The peer
// reads the socket and answers PINGs (it is alive) but never returns
// credit. Each stream's Write of 64 MiB stops at the stream window and
// times out by its deadline; the heap stays flat; the other direction of
// every stream still works; once the session window is used up with data
// still queued, the session ends after StallTimeout (2 min) with GOAWAY
// STALL_TIMEOUT, and a session WINDOW_UPDATE restarts that clock.
func TestHostileNeverGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, nil)
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		// SETTINGS before the observer starts: it answers the client's
		// first PING, which must not reach the client before them.
		require.NoError(t, peer.send(settingsMsg()))
		wire := peer.observe(true)
		const n = defaultInitialSessionWindow/defaultInitialStreamWindow + 1
		streams := make([]*Stream, n)
		for i := range streams {
			streams[i], err = cs.OpenEarly(nil)
			require.NoError(t, err)
		}
		big := make([]byte, 64<<20)
		before := heapInuse()
		// The first n-1 streams fill their windows, and so the session
		// window; the last one's bytes queue behind the session window.
		for _, st := range streams[:n-1] {
			require.Equal(t, defaultInitialStreamWindow, writeTimesOut(t, st, big, 5*time.Second))
		}
		stallStart := time.Now()
		require.Equal(t, defaultInitialStreamWindow, writeTimesOut(t, streams[n-1], big, 5*time.Second))
		// Again: nothing more goes, nothing more is kept.
		for _, st := range streams {
			require.Zero(t, writeTimesOut(t, st, big, time.Second))
		}
		grown := int64(heapInuse()) - int64(before)
		runtime.KeepAlive(big)
		t.Logf("heap growth after %d x 2 Write attempts of 64 MiB: %d KiB", n, grown>>10)
		require.Less(t, grown, int64(4<<20), "heap must stay flat")

		// The receive direction of every stream is intact.
		for i, st := range streams {
			msg := []byte{byte(i), 'o', 'k'}
			require.NoError(t, peer.send(appendOK(frame.AppendData(nil, st.ID(), false, msg))))
			got := make([]byte, 3)
			_, err := st.Read(got)
			require.NoError(t, err)
			require.Equal(t, msg, got)
		}
		require.NoError(t, cs.Err())

		// One minute into the stall the peer grants 1 KiB: it goes out,
		// the session window is zero again, and the clock restarts.
		elapse(time.Minute - time.Since(stallStart))
		require.NoError(t, cs.Err())
		require.NoError(t, peer.send(appendOK(frame.AppendWindowUpdate(nil, 0, 1<<10))))
		grant := time.Now()
		<-cs.CloseChan()
		require.Equal(t, defaultStallTimeout, time.Since(grant))
		l := requireHostileEnd(t, cs, wire, frame.StallTimeout)
		sent := 0
		for _, h := range l.frames {
			if h.Type == frame.TypeData {
				sent += int(h.Length)
			}
		}
		require.Equal(t, defaultInitialSessionWindow+1<<10, sent, "DATA sent: exactly the credit granted")
		for _, st := range streams {
			_, err := st.Write([]byte("x"))
			var se *SessionError
			require.ErrorAs(t, err, &se)
			require.Equal(t, frame.StallTimeout, se.Code)
		}
		_ = b.Close()
	})
}

// TestStallTimeoutOff: a negative StallTimeout turns the check off; a
// stalled session then lives on (bounded by write deadlines only).
func TestStallTimeoutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, &Config{StallTimeout: -1})
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		var s frame.Settings
		require.NoError(t, s.Set(frame.SettingInitialSessionWindow, 16<<10))
		// SETTINGS before the observer starts: it answers the client's
		// first PING, which must not reach the client before them.
		require.NoError(t, peer.send(frame.AppendSettings(nil, &s)))
		wire := peer.observe(true)
		st, err := cs.OpenEarly(nil)
		require.NoError(t, err)
		require.Equal(t, defaultInitialStreamWindow, writeTimesOut(t, st, make([]byte, 1<<20), time.Second), "16 KiB sent, the rest queued")
		elapse(10 * time.Minute)
		require.NoError(t, cs.Err())
		require.NoError(t, cs.Close())
		<-wire
		_ = b.Close()
	})
}

// TestHostileNeverReadsSocket: a peer that reads nothing at all. Writes
// queue at most their send buffers and time out by their deadlines, the
// heap stays flat, and the session ends after WriteTimeout without write
// progress (STALL_TIMEOUT). No GOAWAY can reach such a peer: it only sees
// the connection closed.
func TestHostileNeverReadsSocket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, &Config{KeepAliveInterval: -1})
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		require.NoError(t, peer.send(settingsMsg()))
		start := time.Now()
		streams := make([]*Stream, 5)
		for i := range streams {
			streams[i], err = cs.OpenEarly(nil)
			require.NoError(t, err)
		}
		big := make([]byte, 64<<20)
		before := heapInuse()
		queued := 0
		for _, st := range streams {
			n := writeTimesOut(t, st, big, 4*time.Second)
			require.LessOrEqual(t, n, defaultStreamSendBuffer, "a stream queues at most its send buffer")
			queued += n
		}
		require.Equal(t, min(len(streams)*defaultStreamSendBuffer, defaultSessionSendBuffer), queued, "and the streams together at most the session's")
		grown := int64(heapInuse()) - int64(before)
		runtime.KeepAlive(big)
		t.Logf("heap growth after 5 Write attempts of 64 MiB: %d KiB", grown>>10)
		require.Less(t, grown, int64(4<<20), "heap must stay flat")
		<-cs.CloseChan()
		require.Equal(t, defaultWriteTimeout, time.Since(start))
		var se *SessionError
		require.ErrorAs(t, cs.Err(), &se)
		require.Equal(t, frame.StallTimeout, se.Code)
		require.False(t, se.Remote)
		<-cs.Done()
		l := <-peer.observe(false)
		require.Empty(t, l.frames)
		require.NoError(t, cs.Close())
	})
}

// TestHostileStopsMidFrame: slowloris / a peer that stops inside a message
// (mid WebSocket frame, mid mux frame, between fragments, or dribbling a
// byte at a time). The session ends ReadTimeout (30 s) after the message's
// first byte with GOAWAY KEEPALIVE_TIMEOUT, even with keepalive off and
// WebSocket pings still arriving; time between messages does not count.
func TestHostileStopsMidFrame(t *testing.T) {
	wsFrame := func(fin bool, op ws.OpCode, length int) []byte {
		var buf [ws.MaxHeaderSize]byte
		w := sliceWriter{b: buf[:0]}
		require.NoError(t, ws.WriteHeader(&w, ws.Header{Fin: fin, OpCode: op, Length: int64(length)}))
		return w.b
	}
	data := appendOK(frame.AppendData(nil, 2, false, make([]byte, 16<<10)))
	tests := []struct {
		name  string
		start []byte              // the partial message
		more  func(conn net.Conn) // what the peer does after it, until the end
	}{
		{name: "mid WebSocket header", start: []byte{0x82}},
		{name: "mid mux frame header", start: append(wsFrame(true, ws.OpBinary, len(data)), data[:5]...)},
		{name: "mid mux DATA payload", start: append(wsFrame(true, ws.OpBinary, len(data)), data[:12+1000]...)},
		{name: "between fragments, WebSocket pings go on", start: append(wsFrame(false, ws.OpBinary, 12), frame.AppendPing(nil, false, 9)...),
			more: func(conn net.Conn) {
				for {
					elapse(5 * time.Second)
					if _, err := conn.Write(wsFrame(true, ws.OpPing, 0)); err != nil {
						return
					}
				}
			}},
		{name: "dribbling a byte a second", start: append(wsFrame(true, ws.OpBinary, len(data)), data[:1]...),
			more: func(conn net.Conn) {
				for _, c := range data[1:] {
					elapse(time.Second)
					if _, err := conn.Write([]byte{c}); err != nil {
						return
					}
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := net.Pipe()
				cs, err := Client(a, &Config{KeepAliveInterval: -1})
				require.NoError(t, err)
				peer := newRawPeer(t, b, false)
				wire := peer.observe(false)
				require.NoError(t, peer.send(synFrame(settingsMsg(), 2)))
				// A WebSocket ping and a long pause between messages are
				// no partial message.
				_, err = b.Write(wsFrame(true, ws.OpPing, 0))
				require.NoError(t, err)
				elapse(10 * time.Minute)
				require.NoError(t, cs.Err())

				start := time.Now()
				_, err = b.Write(tt.start)
				require.NoError(t, err)
				moreDone := make(chan struct{})
				go func() {
					defer close(moreDone)
					if tt.more != nil {
						tt.more(b)
					}
				}()
				<-cs.CloseChan()
				require.Equal(t, defaultReadTimeout, time.Since(start), "%v", cs.Err())
				requireHostileEnd(t, cs, wire, frame.KeepaliveTimeout)
				_ = b.Close()
				<-moreDone
			})
		})
	}
}

// sliceWriter appends what is written to b.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// TestReadTimeoutOff: a negative ReadTimeout turns the check off (with
// keepalive off too, a peer stuck mid-message then holds the session until
// it is closed), and Close still ends it within its bounds.
func TestReadTimeoutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, &Config{KeepAliveInterval: -1, ReadTimeout: -1, CloseTimeout: 5 * time.Second})
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		wire := peer.observe(false)
		require.NoError(t, peer.send(settingsMsg()))
		_, err = b.Write([]byte{0x82}) // a message's first byte, and no more
		require.NoError(t, err)
		elapse(time.Hour)
		require.NoError(t, cs.Err())
		start := time.Now()
		require.NoError(t, cs.Close())
		require.LessOrEqual(t, time.Since(start), 5*time.Second)
		l := <-wire
		require.Equal(t, []frame.ErrorCode{frame.NoError}, l.goaways())
	})
}
