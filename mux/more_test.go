package mux

import (
	"context"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// TestInteractiveFirst: a small write on an interactive stream overtakes a
// bulk stream's backlog.
func TestInteractiveFirst(t *testing.T) {
	cs, ss := pipePair(t, nil, nil)
	bulk, bulkPeer := openPair(t, cs, ss)
	ia, iaPeer := openPair(t, cs, ss)
	ia.SetInteractive(true)
	go func() {
		for {
			if _, err := bulk.Write(make([]byte, 256<<10)); err != nil {
				return
			}
		}
	}()
	// The bulk stream saturates the pipe once its peer has taken more than
	// its window and the sender's buffer: the writer is held by credit.
	saturated := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, bulkPeer, 2*(defaultInitialStreamWindow+defaultStreamSendBuffer))
		saturated <- err
		_, _ = io.Copy(io.Discard, bulkPeer)
	}()
	require.NoError(t, <-saturated, "the bulk stream moves")
	// Each small write gets through while the bulk backlog keeps coming
	// (behind it, it would wait for the backlog; a starved interactive
	// stream hangs here).
	for i := 0; i < 20; i++ {
		_, err := ia.Write([]byte{byte(i)})
		require.NoError(t, err)
		buf := make([]byte, 1)
		_, err = io.ReadFull(iaPeer, buf)
		require.NoError(t, err)
		require.Equal(t, byte(i), buf[0], "in order")
	}
	_ = bulk.Reset(frame.Cancel)
}

func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		st, peer := openPair(t, cs, ss)
		_, err := st.Write(make([]byte, 100<<10))
		require.NoError(t, err)
		_, err = io.ReadFull(peer, make([]byte, 100<<10))
		require.NoError(t, err)
		require.NoError(t, peer.Reset(frame.Cancel))
		synctest.Wait() // the reset reached the client
		require.Equal(t, uint64(1), cs.Stats().ResetsRemote)
		c, s := cs.Stats(), ss.Stats()
		require.Equal(t, uint64(1), c.StreamsOpened)
		require.Equal(t, uint64(1), s.StreamsAccepted)
		require.Equal(t, uint64(1), s.ResetsLocal)
		require.GreaterOrEqual(t, c.BytesOut, uint64(100<<10))
		require.GreaterOrEqual(t, s.BytesIn, uint64(100<<10))
		require.Greater(t, c.FramesOut, uint64(7))
		require.Greater(t, s.MessagesIn, uint64(0))
		require.Equal(t, c.MessagesOut, s.MessagesIn)
	})
}

// TestEarlyDataBeforeSettings: an optimistic open with data right at the
// session start (it waits for the peer's SETTINGS) is delivered.
func TestEarlyDataBeforeSettings(t *testing.T) {
	cs, ss := pipePair(t, nil, nil)
	st, err := cs.OpenEarly(nil)
	require.NoError(t, err)
	_, err = st.Write([]byte("0-RTT"))
	require.NoError(t, err)
	require.NoError(t, st.CloseWrite())
	peer, err := ss.AcceptStream(context.Background())
	require.NoError(t, err)
	got, err := io.ReadAll(peer)
	require.NoError(t, err)
	require.Equal(t, "0-RTT", string(got))
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, (*Config)(nil).Validate())
	require.NoError(t, DefaultConfig().Validate())
	require.NoError(t, (&Config{ReadTimeout: -1, StallTimeout: -1}).Validate(), "negative: off")
	for _, c := range []*Config{
		{MaxFramePayload: 100},
		{MaxHeaderBytes: 100},
		{MaxMessageSize: 1000},
		{KeepAliveInterval: time.Minute, KeepAliveTimeout: time.Second},
		{InitialStreamWindow: 2 << 20, InitialSessionWindow: 1 << 20},
		{OpenTimeout: -1},
	} {
		require.Error(t, c.Validate(), "%+v", c)
	}
	_, err := Client(nil, &Config{MaxFramePayload: 1})
	require.Error(t, err)
}

// TestCloseFlushesQueuedData: bytes a Write queued before Session.Close are
// still delivered (the kubelet writes the exit status, then closes).
func TestCloseFlushesQueuedData(t *testing.T) {
	cs, ss := pipePair(t, nil, nil)
	st, peer := openPair(t, cs, ss)
	data := make([]byte, 1<<20) // four times the stream window
	for i := range data {
		data[i] = byte(i)
	}
	go func() {
		_, _ = st.Write(data)
		_ = cs.Close()
	}()
	got, err := io.ReadAll(peer)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestHandlerAccepted(t *testing.T) {
	handled := make(chan *Stream, 1)
	scfg := &Config{Handler: func(st *Stream) error {
		handled <- st
		return nil
	}}
	cs, _ := pipePair(t, nil, scfg)
	st, err := cs.Open(context.Background(), nil)
	require.NoError(t, err)
	peer := <-handled
	<-peer.Accepted() // closed once the ACK was written; a hang otherwise
	_, err = st.Write([]byte("x"))
	require.NoError(t, err)
	b := make([]byte, 1)
	_, err = io.ReadFull(peer, b)
	require.NoError(t, err)
}

// TestOpenWaitsForCredit: OpenEarly waits for stream credit, bounded by
// OpenTimeout.
func TestOpenWaitsForCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, &Config{OpenTimeout: 5 * time.Second}, &Config{MaxStreams: 1})
		st, _ := openPair(t, cs, ss)
		start := time.Now()
		_, err := cs.OpenEarly(nil)
		require.ErrorIs(t, err, ErrTimeout)
		require.Equal(t, 5*time.Second, time.Since(start))
		_ = st.Reset(frame.Cancel)
		cs.Close()
		ss.Close()
	})
}

// TestWriteTimeout: a peer that stops reading its socket ends the session
// with STALL_TIMEOUT after WriteTimeout.
func TestWriteTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cs, err := Client(a, &Config{WriteTimeout: 10 * time.Second, KeepAliveInterval: -1})
		require.NoError(t, err)
		// b never reads: the SETTINGS write never completes.
		start := time.Now()
		<-cs.CloseChan()
		require.Equal(t, 10*time.Second, time.Since(start))
		var se *SessionError
		require.ErrorAs(t, cs.Err(), &se)
		require.Equal(t, frame.StallTimeout, se.Code)
		cs.Close()
		_ = b.Close()
	})
}

// TestHandlerWritesBeforeReturn: DATA from a handler that writes and
// closes before it returns (so before the ACK) is accepted, and the late
// ACK is no protocol error.
func TestHandlerWritesBeforeReturn(t *testing.T) {
	scfg := &Config{Handler: func(st *Stream) error {
		_, _ = st.Write([]byte("early"))
		_ = st.Close()
		return nil
	}}
	cs, _ := pipePair(t, nil, scfg)
	for i := 0; i < 20; i++ {
		st, err := cs.Open(context.Background(), nil)
		require.NoError(t, err)
		require.NoError(t, st.Close())
		got, err := io.ReadAll(st)
		require.NoError(t, err)
		require.Equal(t, "early", string(got))
	}
	require.NoError(t, cs.Err())
}
