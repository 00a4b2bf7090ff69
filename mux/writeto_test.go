package mux

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/internal/testkit/require"
)

// writeSizes is an io.Writer recording its data and the size of each Write;
// it fails every Write after failAfter bytes (when positive).
type writeSizes struct {
	buf       bytes.Buffer
	sizes     []int
	failAfter int
}

var errSinkFull = errors.New("sink full")

func (w *writeSizes) Write(p []byte) (int, error) {
	if w.failAfter > 0 && w.buf.Len()+len(p) > w.failAfter {
		return 0, errSinkFull
	}
	w.sizes = append(w.sizes, len(p))
	return w.buf.Write(p)
}

// acceptedPair opens a stream on cs and returns it with the peer's end.
func acceptedPair(t *testing.T, cs, ss *Session) (*Stream, *Stream) {
	t.Helper()
	ctx := context.Background()
	st, err := cs.OpenEarly(nil)
	require.NoError(t, err)
	_, err = st.Write([]byte{0})
	require.NoError(t, err)
	peer, err := ss.AcceptStream(ctx)
	require.NoError(t, err)
	var one [1]byte
	_, err = io.ReadFull(peer, one[:])
	require.NoError(t, err)
	return st, peer
}

// io.Copy from a Stream takes its WriteTo: it moves everything to io.EOF in
// Writes larger than io.Copy's own 32 KiB buffer (and io.Discard's 8 KiB),
// and reports the end of the stream as success.
func TestStreamWriteTo(t *testing.T) {
	cs, ss := tcpPair(t, nil, nil)
	st, peer := acceptedPair(t, cs, ss)
	var _ io.WriterTo = peer // WriteTo is what io.Copy looks for
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	go func() {
		_, _ = st.Write(data)
		_ = st.CloseWrite()
	}()
	var w writeSizes
	n, err := io.Copy(&w, peer)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	require.True(t, bytes.Equal(data, w.buf.Bytes()), "data differs")
	largest := 0
	for _, s := range w.sizes {
		largest = max(largest, s)
	}
	if largest <= 32<<10 {
		t.Errorf("largest Write %d bytes: io.Copy did not take Stream.WriteTo's buffer", largest)
	}
}

// WriteTo reports what ends it: the peer's reset, the writer's error (with
// the bytes written before it).
func TestStreamWriteToErrors(t *testing.T) {
	t.Run("reset", func(t *testing.T) {
		cs, ss := tcpPair(t, nil, nil)
		st, peer := acceptedPair(t, cs, ss)
		_, err := st.Write([]byte("before the reset"))
		require.NoError(t, err)
		var w writeSizes
		done := make(chan error, 1)
		go func() {
			_, err := peer.WriteTo(&w)
			done <- err
		}()
		require.NoError(t, st.Reset(frame.Cancel))
		err = <-done
		var se *StreamError
		require.True(t, errors.As(err, &se), "WriteTo after a reset: %v", err)
	})
	t.Run("writer fails", func(t *testing.T) {
		cs, ss := tcpPair(t, nil, nil)
		st, peer := acceptedPair(t, cs, ss)
		go func() { _, _ = st.Write(make([]byte, 256<<10)) }()
		w := writeSizes{failAfter: 100 << 10}
		n, err := peer.WriteTo(&w)
		require.ErrorIs(t, err, errSinkFull)
		require.Equal(t, int64(w.buf.Len()), n)
	})
}
