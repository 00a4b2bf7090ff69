package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// acceptOne accepts one stream in the background.
func acceptOne(s *Session) <-chan *Stream {
	ch := make(chan *Stream, 1)
	go func() {
		st, _ := s.AcceptStream(context.Background())
		ch <- st
	}()
	return ch
}

func TestResetAfterData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		acc := acceptOne(ss)
		st, err := cs.Open(context.Background(), nil)
		require.NoError(t, err)
		peer := <-acc
		require.NotNil(t, peer)

		_, err = st.Write([]byte("tail of the output"))
		require.NoError(t, err)
		require.NoError(t, st.Reset(0x1001))

		buf := make([]byte, 100)
		var got []byte
		var rerr error
		for {
			n, err := peer.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				rerr = err
				break
			}
		}
		require.Equal(t, "tail of the output", string(got), "data sent before the reset is delivered first")
		var se *StreamError
		require.ErrorAs(t, rerr, &se)
		require.Equal(t, frame.ErrorCode(0x1001), se.Code)
		require.True(t, se.Remote)
		_, err = peer.Write([]byte("x"))
		require.ErrorAs(t, err, &se)
		require.Equal(t, frame.ErrorCode(0x1001), se.Code)

		// Locally: Read and Write fail with the local code.
		_, err = st.Write([]byte("x"))
		require.ErrorAs(t, err, &se)
		require.False(t, se.Remote)
		synctest.Wait() // the RST/FIN exchange is done
		require.Zero(t, cs.NumStreams())
		require.Zero(t, ss.NumStreams())
	})
}

func TestHalfClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		acc := acceptOne(ss)
		st, err := cs.Open(context.Background(), nil)
		require.NoError(t, err)
		peer := <-acc
		_, err = st.Write([]byte("question"))
		require.NoError(t, err)
		require.NoError(t, st.Close())
		_, err = st.Write([]byte("more"))
		require.ErrorIs(t, err, ErrStreamClosed)
		q, err := io.ReadAll(peer)
		require.NoError(t, err)
		require.Equal(t, "question", string(q))
		_, err = peer.Write([]byte("answer"))
		require.NoError(t, err)
		require.NoError(t, peer.CloseWrite())
		a, err := io.ReadAll(st)
		require.NoError(t, err)
		require.Equal(t, "answer", string(a))
		synctest.Wait() // the RST/FIN exchange is done
		require.Zero(t, cs.NumStreams())
		require.Zero(t, ss.NumStreams())
	})
}

func TestDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{InitialStreamWindow: 64 << 10, StreamSendBuffer: 64 << 10}
		cs, ss := pipePair(t, cfg, cfg)
		acc := acceptOne(ss)
		st, err := cs.Open(context.Background(), nil)
		require.NoError(t, err)
		peer := <-acc

		// Read blocks until the deadline.
		require.NoError(t, st.SetReadDeadline(time.Now().Add(time.Second)))
		start := time.Now()
		_, err = st.Read(make([]byte, 10))
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		var ne net.Error
		require.ErrorAs(t, err, &ne)
		require.True(t, ne.Timeout())
		require.Equal(t, time.Second, time.Since(start))

		// A deadline set while Read waits unblocks it.
		require.NoError(t, st.SetReadDeadline(time.Time{}))
		done := make(chan error)
		go func() {
			_, err := st.Read(make([]byte, 10))
			done <- err
		}()
		synctest.Wait()
		require.NoError(t, st.SetReadDeadline(time.Now()))
		require.ErrorIs(t, <-done, ErrTimeout)

		// Write blocks once the peer's window is full; the deadline
		// reports exactly what was queued.
		require.NoError(t, st.SetWriteDeadline(time.Now().Add(time.Second)))
		n, err := st.Write(make([]byte, 1<<20))
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.Equal(t, 64<<10, n)

		// The peer still receives exactly those bytes.
		require.NoError(t, st.SetWriteDeadline(time.Time{}))
		require.NoError(t, st.CloseWrite())
		got, err := io.ReadAll(peer)
		require.NoError(t, err)
		require.Len(t, got, 64<<10)
		cs.Close()
		ss.Close()
	})
}

func TestHandlerRefuses(t *testing.T) {
	scfg := &Config{Handler: func(st *Stream) error {
		if st.Headers().Get("Streamtype") == "bad" {
			return errors.New("no")
		}
		if st.Headers().Get("Streamtype") == "code" {
			return &StreamError{Code: 0x1002}
		}
		go func() {
			_, _ = io.Copy(st, st)
			_ = st.Close()
		}()
		return nil
	}}
	cs, _ := pipePair(t, nil, scfg)
	ctx := context.Background()
	_, err := cs.Open(ctx, http.Header{"Streamtype": {"bad"}})
	var se *StreamError
	require.ErrorAs(t, err, &se)
	require.Equal(t, frame.RefusedStream, se.Code)
	require.True(t, se.Remote)
	_, err = cs.Open(ctx, http.Header{"Streamtype": {"code"}})
	require.ErrorAs(t, err, &se)
	require.Equal(t, frame.ErrorCode(0x1002), se.Code)

	st, err := cs.Open(ctx, http.Header{"Streamtype": {"good"}})
	require.NoError(t, err)
	_, err = st.Write([]byte("ping"))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	got, err := io.ReadAll(st)
	require.NoError(t, err)
	require.Equal(t, "ping", string(got))
}

func TestOpenEarlyRejected(t *testing.T) {
	// The handler refuses only once the optimistic Write is done: a
	// refusal that came first would fail the Write (rightly), and which
	// comes first must not be left to the scheduler.
	written := make(chan struct{})
	scfg := &Config{Handler: func(st *Stream) error {
		<-written
		return errors.New("no")
	}}
	cs, _ := pipePair(t, nil, scfg)
	st, err := cs.OpenEarly(nil)
	require.NoError(t, err)
	_, err = st.Write([]byte("optimistic"))
	close(written)
	require.NoError(t, err)
	_, err = st.Read(make([]byte, 1))
	var se *StreamError
	require.ErrorAs(t, err, &se)
	require.Equal(t, frame.RefusedStream, se.Code)
}

func TestGoAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		acc := acceptOne(ss)
		st, err := cs.Open(context.Background(), nil)
		require.NoError(t, err)
		peer := <-acc

		require.NoError(t, ss.GoAway(frame.NoError))
		_, err = ss.Open(context.Background(), nil)
		require.ErrorIs(t, err, ErrGoAway)
		synctest.Wait() // the GOAWAY reached the client
		_, err = cs.OpenEarly(nil)
		require.ErrorIs(t, err, ErrGoAway)

		// The existing stream finishes both ways.
		_, err = st.Write([]byte("still works"))
		require.NoError(t, err)
		require.NoError(t, st.Close())
		got, err := io.ReadAll(peer)
		require.NoError(t, err)
		require.Equal(t, "still works", string(got))
		_, err = peer.Write([]byte("reply"))
		require.NoError(t, err)
		require.NoError(t, peer.Close())
		got, err = io.ReadAll(st)
		require.NoError(t, err)
		require.Equal(t, "reply", string(got))

		// Then the session closes by itself.
		<-ss.Done()
		<-cs.Done()
		require.ErrorIs(t, ss.Err(), ErrSessionClosed)
	})
}

func TestCloseDeliversBufferedData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		acc := acceptOne(ss)
		st, err := cs.Open(context.Background(), nil)
		require.NoError(t, err)
		peer := <-acc
		_, err = peer.Write([]byte("exit status 0"))
		require.NoError(t, err)
		// Once the bytes arrived, the server closes the session.
		synctest.Wait()
		cs.mu.Lock()
		require.Equal(t, len("exit status 0"), st.rec.Buffered())
		cs.mu.Unlock()
		require.NoError(t, ss.Close())
		<-cs.Done()
		got, err := io.ReadAll(st)
		require.NoError(t, err, "a graceful close reads as EOF after the data")
		require.Equal(t, "exit status 0", string(got))
		_, err = cs.Open(context.Background(), nil)
		require.ErrorIs(t, err, ErrSessionClosed)
	})
}

func TestOpenFailsWhenSessionDies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The peer never answers opens: a raw peer that only sends SETTINGS.
		a, b := net.Pipe()
		cs, err := Client(a, nil)
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		peer.settings()
		go peer.drain()
		errc := make(chan error)
		go func() {
			_, err := cs.Open(context.Background(), nil)
			errc <- err
		}()
		elapse(time.Second)
		synctest.Wait()
		_ = b.Close()
		err = <-errc
		require.ErrorIs(t, err, ErrSessionClosed)
		cs.Close()
	})
}

// TestConnectionFailureSaysSo: a connection that fails under a session (no
// GOAWAY, no WebSocket close: here the server's socket closes) ends the
// client's session with INTERNAL_ERROR and a message that says the
// connection failed, not that the peer closed the session.
func TestConnectionFailureSaysSo(t *testing.T) {
	a, b := tcpConns(t)
	cs, err := Client(a, nil)
	require.NoError(t, err)
	ss, err := Server(b, nil)
	require.NoError(t, err)
	defer ss.Close()
	defer cs.Close()
	openPair(t, cs, ss) // both ends run
	_ = b.Close()
	<-cs.CloseChan()
	var se *SessionError
	require.ErrorAs(t, cs.Err(), &se)
	require.Equal(t, frame.InternalError, se.Code)
	require.Contains(t, se.Error(), "mux: session closed: the connection failed: INTERNAL_ERROR: ")
	require.NotContains(t, se.Error(), "by peer")
}

func TestOpenTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, &Config{OpenTimeout: 3 * time.Second})
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		peer.settings()
		go peer.drain()
		start := time.Now()
		_, err = cs.Open(context.Background(), nil)
		require.ErrorIs(t, err, ErrTimeout)
		require.Equal(t, 3*time.Second, time.Since(start))
		cs.Close()
		_ = b.Close()
	})
}

func TestSettingsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, nil)
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		go peer.drain()
		<-cs.CloseChan()
		var se *SessionError
		require.ErrorAs(t, cs.Err(), &se)
		require.Equal(t, frame.SettingsTimeout, se.Code)
		require.False(t, se.Remote)
		cs.Close()
		_ = b.Close()
	})
}

func TestKeepAliveDeadPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, nil)
		require.NoError(t, err)
		peer := newRawPeer(t, b, false)
		peer.settings()
		go peer.drain() // reads everything, answers nothing
		start := time.Now()
		<-cs.CloseChan()
		require.Equal(t, defaultKeepAliveTimeout, time.Since(start))
		var se *SessionError
		require.ErrorAs(t, cs.Err(), &se)
		require.Equal(t, frame.KeepaliveTimeout, se.Code)
		cs.Close()
		_ = b.Close()
	})
}

func TestKeepAliveKeepsSessionUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		elapse(5 * time.Minute)
		require.NoError(t, cs.Err())
		require.NoError(t, ss.Err())
		cs.Close()
		ss.Close()
	})
}

func TestIdleTimeoutIgnoresKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		acc := acceptOne(ss)
		st, err := cs.Open(context.Background(), nil)
		require.NoError(t, err)
		<-acc
		_, err = st.Write([]byte("x"))
		require.NoError(t, err)
		synctest.Wait()
		start := time.Now()
		ss.SetIdleTimeout(time.Minute) // four keepalive intervals
		<-ss.CloseChan()
		require.Equal(t, time.Minute, time.Since(start))
		var se *SessionError
		require.ErrorAs(t, ss.Err(), &se)
		require.Equal(t, frame.IdleTimeout, se.Code)
		<-cs.CloseChan()
		require.ErrorAs(t, cs.Err(), &se)
		require.Equal(t, frame.IdleTimeout, se.Code)
		require.True(t, se.Remote)
		cs.Close()
		ss.Close()
	})
}

func TestCloseWhenPeerNeverReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, &Config{CloseTimeout: 2 * time.Second})
		require.NoError(t, err)
		// b is never read: even the SETTINGS write blocks.
		start := time.Now()
		require.NoError(t, cs.Close())
		require.LessOrEqual(t, time.Since(start), 2*time.Second)
		require.NoError(t, cs.Close(), "idempotent")
		_ = b.Close()
	})
}

func TestPing(t *testing.T) {
	cs, ss := pipePair(t, nil, nil)
	rtt, err := cs.Ping(context.Background())
	require.NoError(t, err)
	require.Greater(t, rtt, time.Duration(0))
	_, err = ss.Ping(context.Background())
	require.NoError(t, err)
}

// rawPeer speaks raw WSMUX/1 frames over a WebSocket message connection.
type rawPeer struct {
	t    testing.TB
	conn net.Conn
	ws   *wsio.Conn
	mu   sync.Mutex // one writer at a time (the script and PING answers)
}

func newRawPeer(t testing.TB, conn net.Conn, client bool) *rawPeer {
	return &rawPeer{t: t, conn: conn, ws: wsio.New(conn, nil, client, 1<<20)}
}

func (p *rawPeer) send(frames []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	buf := make([]byte, wsio.HeaderRoom, wsio.HeaderRoom+len(frames))
	return p.ws.WriteMessage(append(buf, frames...))
}

func (p *rawPeer) settings() {
	var s frame.Settings
	go func() { _ = p.send(frame.AppendSettings(nil, &s)) }()
}

// drain reads and drops every message until the connection fails.
func (p *rawPeer) drain() {
	for {
		if _, err := p.ws.ReadMessage(); err != nil {
			_ = p.conn.Close()
			return
		}
	}
}

// Our own PINGs never trip a wsmux peer's PING-flood limit, however fast
// the application asks (a tight Ping loop on a fast link used to get the
// session closed with ENHANCE_YOUR_CALM: found by FuzzSessionPair). Pings
// beyond the outbound burst wait for the bucket, so 200 of them take at
// least (200 - pingOutBurst) / pingRate of (fake) time, and every one of
// them gets its answer.
func TestPingsStayUnderPeerLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		start := time.Now()
		const n = 200
		for i := range n {
			_, err := cs.Ping(context.Background())
			require.NoError(t, err, "ping %d", i)
		}
		took := time.Since(start)
		require.NoError(t, cs.Err())
		require.NoError(t, ss.Err())
		require.Zero(t, ss.Stats().Errors[frame.EnhanceYourCalm])
		min := time.Duration(n-pingOutBurst) * time.Second / pingRate
		require.GreaterOrEqual(t, took, min-time.Second)
		require.Less(t, took, min+5*time.Second)
		require.NoError(t, cs.Close())
		require.NoError(t, ss.Close())
	})
}
