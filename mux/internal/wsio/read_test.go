package wsio

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/gobwas/ws"
	"github.com/wsmux/wsmux/internal/testkit/require"
)

// The read side under hostile and unusual input: violations, declared
// lengths, fragmentation, control frames, leftover handshake bytes, EOF
// and the message buffer policy.

func TestReadViolations(t *testing.T) {
	const maxMsg = 4096
	type peerFrames func(masked bool) [][]byte
	tests := []struct {
		name  string
		roles []bool // roles of the Conn under test; nil means both
		in    peerFrames
		code  ws.StatusCode
	}{
		{
			name: "text frame",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpText, true, 0, m, []byte("hi"))}
			},
			code: ws.StatusUnsupportedData,
		},
		{
			name: "rsv1 bit",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpBinary, true, ws.Rsv(true, false, false), m, []byte("x"))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "rsv3 bit on ping",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpPing, true, ws.Rsv(false, false, true), m, nil)}
			},
			code: ws.StatusProtocolError,
		},
		{
			name:  "unmasked frame to a server",
			roles: []bool{false},
			in: func(bool) [][]byte {
				return [][]byte{rawFrame(ws.OpBinary, true, 0, false, []byte("x"))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name:  "masked frame to a client",
			roles: []bool{true},
			in: func(bool) [][]byte {
				return [][]byte{rawFrame(ws.OpBinary, true, 0, true, []byte("x"))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "control frame of 126 bytes",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpPing, true, 0, m, make([]byte, 126))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "fragmented ping",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpPing, false, 0, m, []byte("p"))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "fragmented close",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpClose, false, 0, m, nil)}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "continuation without a start",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpContinuation, true, 0, m, []byte("x"))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "continuation after a complete message",
			in: func(m bool) [][]byte {
				return [][]byte{
					rawFrame(ws.OpBinary, true, 0, m, []byte("ok")),
					rawFrame(ws.OpContinuation, true, 0, m, []byte("x")),
				}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "new binary frame inside a fragmented message",
			in: func(m bool) [][]byte {
				return [][]byte{
					rawFrame(ws.OpBinary, false, 0, m, []byte("a")),
					rawFrame(ws.OpBinary, true, 0, m, []byte("b")),
				}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "text frame inside a fragmented message",
			in: func(m bool) [][]byte {
				return [][]byte{
					rawFrame(ws.OpBinary, false, 0, m, []byte("a")),
					rawFrame(ws.OpText, true, 0, m, []byte("b")),
				}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "reserved data opcode",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpCode(0x3), true, 0, m, nil)}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "reserved control opcode",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpCode(0xb), true, 0, m, nil)}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "64-bit length with the most significant bit set",
			in: func(bool) [][]byte {
				return [][]byte{{0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1}}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "single frame over maxMessage",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpBinary, true, 0, m, make([]byte, maxMsg+1))}
			},
			code: ws.StatusMessageTooBig,
		},
		{
			name: "fragments adding up to over maxMessage",
			in: func(m bool) [][]byte {
				return [][]byte{
					rawFrame(ws.OpBinary, false, 0, m, make([]byte, maxMsg-10)),
					rawFrame(ws.OpContinuation, false, 0, m, make([]byte, 10)),
					rawFrame(ws.OpContinuation, true, 0, m, make([]byte, 1)),
				}
			},
			code: ws.StatusMessageTooBig,
		},
		{
			name: "declared length 1<<40",
			in: func(m bool) [][]byte {
				return [][]byte{rawHeader(ws.OpBinary, true, m, 1<<40)}
			},
			code: ws.StatusMessageTooBig,
		},
		{
			name: "close with a 1-byte payload",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpClose, true, 0, m, []byte{3})}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "close with code 999",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpClose, true, 0, m, ws.NewCloseFrameBody(999, ""))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "close with reserved code 1005",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpClose, true, 0, m, ws.NewCloseFrameBody(ws.StatusNoStatusRcvd, ""))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "close with undefined code 1016",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpClose, true, 0, m, ws.NewCloseFrameBody(1016, ""))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "close with code 5000",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpClose, true, 0, m, ws.NewCloseFrameBody(5000, ""))}
			},
			code: ws.StatusProtocolError,
		},
		{
			name: "close with invalid UTF-8 reason",
			in: func(m bool) [][]byte {
				return [][]byte{rawFrame(ws.OpClose, true, 0, m, append(ws.NewCloseFrameBody(1000, ""), 0xff, 0xfe))}
			},
			code: ws.StatusProtocolError,
		},
	}
	for _, tt := range tests {
		roles := tt.roles
		if roles == nil {
			roles = []bool{true, false}
		}
		for _, client := range roles {
			t.Run(tt.name+"/"+roleName(client), func(t *testing.T) {
				// A client's peer is a server: it does not mask, and vice versa.
				in := bytes.Join(tt.in(!client), nil)
				g := &guardReader{data: in}
				nc := &bufConn{r: g}
				c := New(nc, nil, client, maxMsg)
				var err error
				for range 3 {
					if _, err = c.ReadMessage(); err != nil {
						break
					}
				}
				var pe *ProtocolError
				require.ErrorAs(t, err, &pe, "got %v", err)
				require.Equal(t, tt.code, pe.Close, pe.Reason)
				require.NotEmpty(t, pe.Error())
				// Sticky.
				_, err2 := c.ReadMessage()
				require.Same(t, err, err2)
				// A violation queues nothing for the writer.
				require.NoError(t, c.FlushControl())
				require.Zero(t, nc.w.Len())
			})
		}
	}
}

// A frame declaring 1<<40 bytes fails on the header alone: no payload read,
// nothing allocated for it.
func TestHugeDeclaredLength(t *testing.T) {
	for _, client := range []bool{true, false} {
		t.Run(roleName(client), func(t *testing.T) {
			g := &guardReader{data: rawHeader(ws.OpBinary, true, !client, 1<<40)}
			c := New(&bufConn{r: g}, nil, client, 1<<20)
			_, err := c.ReadMessage()
			var pe *ProtocolError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, ws.StatusMessageTooBig, pe.Close)
			require.Zero(t, cap(c.buf), "nothing allocated from the declared length")
			require.Empty(t, g.data)
		})
	}
}

// A frame that declares 1 MiB (within the limit) and sends 10 bytes costs a
// small buffer, not 1 MiB: the buffer grows with the bytes that arrive.
func TestDeclaredLengthNotTrustedForAllocation(t *testing.T) {
	for _, client := range []bool{true, false} {
		t.Run(roleName(client), func(t *testing.T) {
			in := append(rawHeader(ws.OpBinary, true, !client, 1<<20), make([]byte, 10)...)
			c := New(newBufConn(in), nil, client, 1<<20)
			_, err := c.ReadMessage()
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			require.LessOrEqual(t, cap(c.buf), growAhead)
		})
	}
}

func TestFragmentedMessageWithControlFrames(t *testing.T) {
	for _, client := range []bool{true, false} {
		t.Run(roleName(client), func(t *testing.T) {
			m := !client
			in := bytes.Join([][]byte{
				rawFrame(ws.OpBinary, false, 0, m, []byte("hello ")),
				rawFrame(ws.OpPing, true, 0, m, []byte("are you there")),
				rawFrame(ws.OpContinuation, false, 0, m, []byte("wor")),
				rawFrame(ws.OpPong, true, 0, m, []byte("unsolicited")),
				rawFrame(ws.OpContinuation, false, 0, m, nil),
				rawFrame(ws.OpContinuation, true, 0, m, []byte("ld")),
				rawFrame(ws.OpBinary, true, 0, m, []byte("next")),
			}, nil)
			nc := newBufConn(in)
			c := New(nc, nil, client, 1<<20)
			notified := 0
			c.SetNotify(func() { notified++ })

			msg, err := c.ReadMessage()
			require.NoError(t, err)
			require.Equal(t, "hello world", string(msg))
			require.Equal(t, 1, notified)
			require.Zero(t, nc.w.Len(), "the reader never writes")

			require.NoError(t, c.FlushControl())
			frames := decodeFrames(t, nc.w.Bytes())
			require.Len(t, frames, 1)
			require.Equal(t, ws.OpPong, frames[0].OpCode)
			require.True(t, frames[0].Fin)
			require.Equal(t, client, frames[0].Masked, "a client masks, a server does not")
			require.Equal(t, "are you there", string(frames[0].Payload))
			require.Equal(t, uint64(nc.w.Len()), c.BytesWritten())

			nc.w.Reset()
			require.NoError(t, c.FlushControl())
			require.Zero(t, nc.w.Len(), "nothing queued any more")

			msg, err = c.ReadMessage()
			require.NoError(t, err)
			require.Equal(t, "next", string(msg))
			require.Equal(t, uint64(len(in)), c.BytesRead(), "every wire byte counted, pong included")

			_, err = c.ReadMessage()
			require.ErrorIs(t, err, io.EOF)
		})
	}
}

func TestPingsCoalesce(t *testing.T) {
	for _, client := range []bool{true, false} {
		t.Run(roleName(client), func(t *testing.T) {
			m := !client
			in := bytes.Join([][]byte{
				rawFrame(ws.OpPing, true, 0, m, []byte("1")),
				rawFrame(ws.OpPing, true, 0, m, []byte("2")),
				rawFrame(ws.OpPing, true, 0, m, nil),
				rawFrame(ws.OpPing, true, 0, m, []byte("last")),
				rawFrame(ws.OpBinary, true, 0, m, []byte("data")),
			}, nil)
			nc := newBufConn(in)
			c := New(nc, nil, client, 0)
			notified := 0
			c.SetNotify(func() { notified++ })
			msg, err := c.ReadMessage()
			require.NoError(t, err)
			require.Equal(t, "data", string(msg))
			require.Equal(t, 1, notified, "one wake-up while a pong is pending")
			require.NoError(t, c.FlushControl())
			frames := decodeFrames(t, nc.w.Bytes())
			require.Len(t, frames, 1)
			require.Equal(t, ws.OpPong, frames[0].OpCode)
			require.Equal(t, "last", string(frames[0].Payload))
		})
	}
}

// Bytes a handshake left in its bufio.Reader come first, then the socket;
// a message may straddle the two.
func TestBufferedHandshakeBytes(t *testing.T) {
	for _, client := range []bool{true, false} {
		t.Run(roleName(client), func(t *testing.T) {
			m := !client
			wire := bytes.Join([][]byte{
				rawFrame(ws.OpBinary, true, 0, m, []byte("first")),
				rawFrame(ws.OpBinary, true, 0, m, pattern(1, 5000)),
				rawFrame(ws.OpBinary, true, 0, m, []byte("third")),
			}, nil)
			split := len(wire) / 2
			br := bufio.NewReader(bytes.NewReader(wire[:split]))
			_, err := br.Peek(split)
			require.NoError(t, err)
			c := New(newBufConn(wire[split:]), br, client, 0)
			for _, want := range [][]byte{[]byte("first"), pattern(1, 5000), []byte("third")} {
				msg, err := c.ReadMessage()
				require.NoError(t, err)
				require.Equal(t, want, msg)
			}
			_, err = c.ReadMessage()
			require.ErrorIs(t, err, io.EOF)
		})
	}
}

func TestUnexpectedEOF(t *testing.T) {
	full := rawFrame(ws.OpBinary, false, 0, false, []byte("abcdef"))
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{name: "clean end", in: nil, want: io.EOF},
		{name: "inside a payload", in: rawFrame(ws.OpBinary, true, 0, false, []byte("abcdef"))[:5], want: io.ErrUnexpectedEOF},
		{name: "inside a fragmented message", in: full, want: io.ErrUnexpectedEOF},
		{name: "inside a header", in: []byte{0x82}, want: io.ErrUnexpectedEOF},
		{name: "inside a control payload", in: rawFrame(ws.OpPing, true, 0, false, []byte("abc"))[:3], want: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(newBufConn(tt.in), nil, true, 0)
			_, err := c.ReadMessage()
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func TestShrinkPolicy(t *testing.T) {
	lc := &loopConn{}
	w := New(lc, nil, true, 0)
	r := New(lc, nil, false, 0)
	send := func(n int) []byte {
		t.Helper()
		buf := append(make([]byte, HeaderRoom), pattern(n, n)...)
		require.NoError(t, w.WriteMessage(buf))
		msg, err := r.ReadMessage()
		require.NoError(t, err)
		require.Equal(t, pattern(n, n), msg)
		return msg
	}
	big := send(1 << 20)
	require.Equal(t, 1<<20, cap(r.buf))
	for range shrinkAfter - 1 {
		send(100)
	}
	send(shrinkAbove + 1) // a large message resets the count
	for range shrinkAfter - 1 {
		send(16 << 10)
	}
	require.Equal(t, 1<<20, cap(r.buf), "not shrunk before shrinkAfter small messages in a row")
	last := send(16 << 10)
	require.Equal(t, 1<<20, cap(r.buf), "the last message's buffer is still the big one")
	send(10)
	require.LessOrEqual(t, cap(r.buf), shrinkAbove, "released after shrinkAfter small messages")
	require.Equal(t, pattern(16<<10, 16<<10), last, "the slice returned before the shrink was not reused")
	_ = big

	// Steady small traffic never regrows past the small size.
	for range 100 {
		send(4000)
	}
	require.LessOrEqual(t, cap(r.buf), shrinkAbove)
}
