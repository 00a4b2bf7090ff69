package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/pool"
)

// retainingEngine is a server engine past the SETTINGS exchange with the
// peer's stream 1 accepted.
func retainingEngine(t *testing.T) (*Engine, *Stream) {
	t.Helper()
	e := New(testConfig(), false, nil, 0)
	var s frame.Settings
	msg := frame.AppendSettings(nil, &s)
	msg = synFrame(msg, 1)
	require.NoError(t, e.Feed(msg, time.Second))
	st := e.Accept()
	require.NotNil(t, st)
	return e, st
}

// feedRetained feeds msg from a message buffer of its own, as wsio would,
// and returns the buffer, which the caller (the reader) still holds.
func feedRetained(t *testing.T, e *Engine, msg []byte) *pool.Msg {
	t.Helper()
	m := pool.GetMsg(len(msg))
	n := copy(m.B, msg)
	require.NoError(t, e.FeedRetain(m.B[:n], m, time.Second))
	return m
}

// Runs of DATA of at least minRetain bytes stay in the message buffer (the
// buffer is shared until they are read); shorter runs are copied; the
// bytes read back are the bytes sent, in order.
func TestRetainKeepsRunsInPlace(t *testing.T) {
	e, st := retainingEngine(t)
	src := make([]byte, 64<<10)
	for i := range src {
		src[i] = byte(i*31 + 7)
	}
	var msg []byte
	sizes := []int{100, minRetain, 16 << 10, minRetain - 1, 10 << 10}
	off := 0
	for _, n := range sizes {
		msg = appendOK(frame.AppendData(msg, 1, false, src[off:off+n]))
		off += n
	}
	m := feedRetained(t, e, msg)
	require.True(t, m.Shared(), "runs kept in place hold the buffer")
	require.Equal(t, 3, m.Held, "three runs of at least minRetain bytes")
	require.Equal(t, len(m.B), e.retained)

	// The reader gives its buffer up (wsio does at its next message);
	// nothing it sees may change what the stream reads.
	m.Release()
	var got []byte
	buf := make([]byte, 3000)
	for st.rxq.Len() > 0 {
		n, wait, err := e.Read(st, buf, time.Second)
		require.NoError(t, err)
		require.False(t, wait)
		got = append(got, buf[:n]...)
	}
	require.True(t, bytes.Equal(src[:off], got), "bytes read back differ")
	require.Zero(t, e.retained, "the buffer is no longer counted once read")
	require.Zero(t, m.Held)
}

// The retained buffers of a session are bounded (retainBudget and the
// session window): past the bound, payload is copied and the new message's
// buffer is not shared.
func TestRetainBudget(t *testing.T) {
	e, st := retainingEngine(t)
	payload := bytes.Repeat([]byte{0xa5}, 16<<10)
	var held []*pool.Msg
	budget := min(int(e.sessRecv.Window()), retainBudget)
	// Each message lives in a 256 KiB buffer (as a large batch would)
	// and carries one 16 KiB run.
	for e.retained+(256<<10) <= budget {
		m := pool.GetMsg(256 << 10)
		msg := appendOK(frame.AppendData(m.B[:0], 1, false, payload))
		require.NoError(t, e.FeedRetain(msg, m, time.Second))
		require.True(t, m.Shared())
		held = append(held, m)
	}
	require.NotEmpty(t, held)
	m := pool.GetMsg(256 << 10)
	msg := appendOK(frame.AppendData(m.B[:0], 1, false, payload))
	require.NoError(t, e.FeedRetain(msg, m, time.Second))
	require.False(t, m.Shared(), "a buffer past the budget is copied out, not held")
	require.LessOrEqual(t, e.retained, budget)

	// A reset drops the runs and gives every buffer back.
	e.Reset(st, frame.Cancel, time.Second)
	require.Zero(t, e.retained)
	for _, h := range held {
		require.False(t, h.Shared(), "a reset stream still holds a buffer")
		require.Zero(t, h.Held)
	}
}

// Plain Feed (no buffer given) never retains: the caller may reuse the
// message at once.
func TestFeedCopies(t *testing.T) {
	e, st := retainingEngine(t)
	payload := bytes.Repeat([]byte{1, 2, 3, 4}, 4<<10)
	msg := appendOK(frame.AppendData(nil, 1, false, payload))
	require.NoError(t, e.Feed(msg, time.Second))
	clear(msg)
	buf := make([]byte, len(payload))
	n, _, err := e.Read(st, buf, time.Second)
	require.NoError(t, err)
	require.Equal(t, payload, buf[:n])
	require.Zero(t, e.retained)
}

func TestRxQueueMixed(t *testing.T) {
	var q rxQueue
	src := make([]byte, 100<<10)
	for i := range src {
		src[i] = byte(i * 13)
	}
	m := pool.GetMsg(len(src))
	copy(m.B, src)
	var want []byte
	off := 0
	for i, n := range []int{1, 5000, 16 << 10, 20000, 16<<10 + 1, 3} {
		if i%2 == 1 {
			m.Held++
			m.Retain()
			q.retain(m.B[off:off+n], m)
		} else {
			q.write(src[off : off+n])
		}
		want = append(want, src[off:off+n]...)
		off += n
	}
	require.Equal(t, len(want), q.Len())
	var got []byte
	buf := make([]byte, 7000)
	for q.Len() > 0 {
		n := q.read(buf)
		got = append(got, buf[:n]...)
	}
	require.Equal(t, want, got)
	require.Zero(t, q.cnt, "nothing held once drained")
	require.False(t, m.Shared())
	m.Release()
}
