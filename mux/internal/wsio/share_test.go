package wsio

import (
	"bytes"
	"net"
	"testing"

	"github.com/gobwas/ws"
	"github.com/stretchr/testify/require"
)

// A message buffer someone kept a reference to (a receive queue holding
// runs of it in place) is never written again by the reader: the next
// message goes into another buffer of the same size, and the kept bytes
// stay as they were.
func TestSharedBufferIsNotReused(t *testing.T) {
	a := bytes.Repeat([]byte{0xaa}, 100<<10)
	b := bytes.Repeat([]byte{0xbb}, 30<<10)
	wire := append(rawFrame(ws.OpBinary, true, 0, true, a), rawFrame(ws.OpBinary, true, 0, true, b)...)
	wire = append(wire, rawFrame(ws.OpBinary, true, 0, true, a)...)
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		_, _ = client.Write(wire)
		_ = client.Close()
	}()
	c := New(server, nil, false, 0)

	msg, err := c.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, a, msg)
	first := c.Buffer()
	first.Retain() // a queue keeps msg in place

	msg2, err := c.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, b, msg2)
	require.NotSame(t, first, c.Buffer(), "the shared buffer was read into again")
	require.Len(t, c.Buffer().B, len(first.B), "the next buffer has the size the shared one reached")
	require.Equal(t, a, msg, "the kept message changed")

	// Released by the queue, the buffer serves a later message.
	first.Release() // the last reference: the reader's went when it gave the buffer up
	_, err = c.ReadMessage()
	require.NoError(t, err)
}
