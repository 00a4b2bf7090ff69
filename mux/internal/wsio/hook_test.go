package wsio

import (
	"bytes"
	"io"
	"testing"

	"github.com/gobwas/ws"
	"github.com/wsmux/wsmux/internal/testkit/require"
)

// TestMessageHook: the hook brackets each message (fragments and control
// frames inside it included) and each control frame between messages, so
// its owner can bound how long a message stays partly received.
func TestMessageHook(t *testing.T) {
	in := bytes.Join([][]byte{
		rawFrame(ws.OpPing, true, 0, true, []byte("between")),
		rawFrame(ws.OpBinary, false, 0, true, []byte("hel")),
		rawFrame(ws.OpPing, true, 0, true, []byte("inside")),
		rawFrame(ws.OpContinuation, true, 0, true, []byte("lo")),
		rawFrame(ws.OpBinary, true, 0, true, []byte("next")),
	}, nil)
	c := New(newBufConn(in), nil, false, 1<<20)
	var events []bool
	c.SetMessageHook(func(started bool) { events = append(events, started) })

	require.False(t, c.ControlPending())
	msg, err := c.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, "hello", string(msg))
	require.Equal(t, []bool{true, false, true, false}, events, "ping between messages, then the message")
	require.True(t, c.ControlPending(), "a pong is queued")

	events = events[:0]
	msg, err = c.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, "next", string(msg))
	require.Equal(t, []bool{true, false}, events)

	events = events[:0]
	_, err = c.ReadMessage()
	require.ErrorIs(t, err, io.EOF)
	require.Empty(t, events, "no byte, no message")
}
