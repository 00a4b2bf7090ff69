package wsio

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gobwas/ws"
	"github.com/stretchr/testify/require"

	"github.com/wsmux/wsmux/internal/loopback"
)

// connPair returns two connected net.Conns over the named transport.
func connPair(t *testing.T, transport string) (net.Conn, net.Conn) {
	t.Helper()
	switch transport {
	case "pipe":
		a, b := net.Pipe()
		return a, b
	case "tcp":
		a, b, err := loopback.Pair()
		require.NoError(t, err)
		return a, b
	}
	t.Fatalf("unknown transport %q", transport)
	return nil, nil
}

func TestRoundTrip(t *testing.T) {
	sizes := []int{1, 2, 125, 126, 127, 1000, 4095, 4096, 4097, 16 << 10, 65535, 65536, 65537, 300_000, 1 << 20}
	rng := rand.New(rand.NewPCG(1, 2))
	many := make([]int, 2000)
	for i := range many {
		many[i] = 1 + rng.IntN(70_000)
	}
	tests := []struct {
		name  string
		sizes []int
	}{
		{name: "sizes", sizes: sizes},
		{name: "many", sizes: many},
	}
	for _, transport := range []string{"pipe", "tcp"} {
		for _, clientWrites := range []bool{true, false} {
			for _, tt := range tests {
				name := transport + "/" + roleName(clientWrites) + "-to-" + roleName(!clientWrites) + "/" + tt.name
				t.Run(name, func(t *testing.T) {
					a, b := connPair(t, transport)
					defer a.Close()
					defer b.Close()
					w := New(a, nil, clientWrites, 1<<20)
					r := New(b, nil, !clientWrites, 1<<20)

					errc := make(chan error, 1)
					go func() {
						var buf []byte
						for i, n := range tt.sizes {
							buf = append(buf[:0], make([]byte, HeaderRoom)...)
							buf = append(buf, pattern(i, n)...)
							if err := w.WriteMessage(buf); err != nil {
								errc <- err
								return
							}
						}
						errc <- nil
					}()
					var total uint64
					for i, n := range tt.sizes {
						msg, err := r.ReadMessage()
						require.NoError(t, err)
						require.Len(t, msg, n, "message %d", i)
						require.True(t, bytes.Equal(pattern(i, n), msg), "message %d content", i)
						total += uint64(n)
					}
					require.NoError(t, <-errc)
					require.Equal(t, w.BytesWritten(), r.BytesRead())
					require.Greater(t, r.BytesRead(), total)
					require.Same(t, a, w.NetConn())
				})
			}
		}
	}
}

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

func TestPeerClose(t *testing.T) {
	tests := []struct {
		name       string
		payload    []byte
		wantCode   ws.StatusCode
		wantReason string
		wantReply  []byte
	}{
		{name: "normal with reason", payload: ws.NewCloseFrameBody(ws.StatusNormalClosure, "bye"), wantCode: 1000, wantReason: "bye", wantReply: []byte{0x03, 0xe8}},
		{name: "going away", payload: ws.NewCloseFrameBody(ws.StatusGoingAway, ""), wantCode: 1001, wantReply: []byte{0x03, 0xe9}},
		{name: "application code", payload: ws.NewCloseFrameBody(4000, "app"), wantCode: 4000, wantReason: "app", wantReply: []byte{0x0f, 0xa0}},
		{name: "empty", payload: nil, wantCode: ws.StatusNoStatusRcvd, wantReply: []byte{}},
	}
	for _, tt := range tests {
		for _, client := range []bool{true, false} {
			t.Run(tt.name+"/"+roleName(client), func(t *testing.T) {
				in := bytes.Join([][]byte{
					rawFrame(ws.OpBinary, true, 0, !client, []byte("before")),
					rawFrame(ws.OpClose, true, 0, !client, tt.payload),
				}, nil)
				nc := newBufConn(in)
				c := New(nc, nil, client, 0)
				notified := 0
				c.SetNotify(func() { notified++ })
				msg, err := c.ReadMessage()
				require.NoError(t, err)
				require.Equal(t, "before", string(msg))

				_, err = c.ReadMessage()
				var ce *CloseError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, tt.wantCode, ce.Code)
				require.Equal(t, tt.wantReason, ce.Reason)
				require.NotEmpty(t, ce.Error())
				require.Equal(t, 1, notified)

				require.NoError(t, c.FlushControl())
				frames := decodeFrames(t, nc.w.Bytes())
				require.Len(t, frames, 1)
				require.Equal(t, ws.OpClose, frames[0].OpCode)
				require.Equal(t, client, frames[0].Masked)
				require.Equal(t, tt.wantReply, frames[0].Payload)

				// After the close reply: no data, no second close.
				n := nc.w.Len()
				require.ErrorIs(t, c.WriteMessage(make([]byte, HeaderRoom+3)), ErrCloseSent)
				require.NoError(t, c.WriteClose(ws.StatusNormalClosure, "again"))
				require.NoError(t, c.FlushControl())
				require.Equal(t, n, nc.w.Len())
			})
		}
	}
}

// We close first; the peer's close reply must not be answered again.
func TestCloseHandshakeInitiatedLocally(t *testing.T) {
	for _, client := range []bool{true, false} {
		t.Run(roleName(client), func(t *testing.T) {
			nc := newBufConn(rawFrame(ws.OpPing, true, 0, !client, []byte("p")),
				rawFrame(ws.OpClose, true, 0, !client, ws.NewCloseFrameBody(ws.StatusNormalClosure, "")))
			c := New(nc, nil, client, 0)
			require.NoError(t, c.WriteClose(ws.StatusNormalClosure, "done"))
			frames := decodeFrames(t, nc.w.Bytes())
			require.Len(t, frames, 1)
			require.Equal(t, ws.OpClose, frames[0].OpCode)
			nc.w.Reset()

			_, err := c.ReadMessage()
			var ce *CloseError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, ws.StatusNormalClosure, ce.Code)
			require.NoError(t, c.FlushControl())
			require.Zero(t, nc.w.Len(), "no pong and no close reply after our close")
		})
	}
}

func TestWriteClose(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes, 2-byte runes
	tests := []struct {
		name       string
		code       ws.StatusCode
		reason     string
		wantCode   ws.StatusCode
		wantReason string
	}{
		{name: "code and reason", code: ws.StatusPolicyViolation, reason: "mux protocol error", wantCode: 1008, wantReason: "mux protocol error"},
		{name: "code only", code: ws.StatusNormalClosure, wantCode: 1000},
		{name: "no code", code: 0, reason: "ignored", wantCode: ws.StatusNoStatusRcvd},
		{name: "long reason truncated at a rune boundary", code: ws.StatusMessageTooBig, reason: long, wantCode: 1009, wantReason: long[:122]},
		{name: "ascii reason truncated to 123 bytes", code: ws.StatusGoingAway, reason: strings.Repeat("x", 300), wantCode: 1001, wantReason: strings.Repeat("x", 123)},
	}
	for _, tt := range tests {
		for _, client := range []bool{true, false} {
			t.Run(tt.name+"/"+roleName(client), func(t *testing.T) {
				w := &loopConn{}
				c := New(w, nil, client, 0)
				require.NoError(t, c.WriteClose(tt.code, tt.reason))
				frames := decodeFrames(t, bytes.Clone(w.b.Bytes()))
				require.Len(t, frames, 1)
				require.LessOrEqual(t, len(frames[0].Payload), ws.MaxControlFramePayloadSize)
				require.True(t, utf8.Valid(frames[0].Payload[min(2, len(frames[0].Payload)):]))
				require.Equal(t, client, frames[0].Masked)

				peer := New(w, nil, !client, 0)
				_, err := peer.ReadMessage()
				var ce *CloseError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, tt.wantCode, ce.Code)
				require.Equal(t, tt.wantReason, ce.Reason)

				require.NoError(t, c.WriteClose(ws.StatusNormalClosure, "second"))
				require.Zero(t, w.b.Len(), "one close frame only")
				require.ErrorIs(t, c.WriteMessage(make([]byte, HeaderRoom)), ErrCloseSent)
			})
		}
	}
}

func TestWriteMessageStaysInsideBuf(t *testing.T) {
	const guard = 32
	for _, client := range []bool{true, false} {
		for _, n := range []int{0, 1, 3, 16, 125, 126, 127, 1000, 65535, 65536, 100_000} {
			t.Run(roleName(client)+"/"+itoa(n), func(t *testing.T) {
				back := make([]byte, guard+HeaderRoom+n+guard)
				for i := range back {
					back[i] = 0xa5
				}
				want := pattern(n, n)
				buf := back[guard : guard+HeaderRoom+n : guard+HeaderRoom+n]
				copy(buf[HeaderRoom:], want)

				lc := &loopConn{}
				c := New(lc, nil, client, 0)
				require.NoError(t, c.WriteMessage(buf))
				for i := range guard {
					require.Equal(t, byte(0xa5), back[i], "byte %d before buf", i)
					require.Equal(t, byte(0xa5), back[len(back)-1-i], "byte %d after buf", i)
				}
				if client && n >= 16 {
					require.False(t, bytes.Equal(want, buf[HeaderRoom:]), "a client masks in place")
				}
				if !client {
					require.Equal(t, want, buf[HeaderRoom:], "a server leaves the payload alone")
				}
				require.Equal(t, uint64(lc.b.Len()), c.BytesWritten())

				frames := decodeFrames(t, bytes.Clone(lc.b.Bytes()))
				require.Len(t, frames, 1)
				require.Equal(t, ws.OpBinary, frames[0].OpCode)
				require.True(t, frames[0].Fin)
				require.Equal(t, client, frames[0].Masked)
				require.Equal(t, want, frames[0].Payload)

				peer := New(lc, nil, !client, 0)
				msg, err := peer.ReadMessage()
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, msg))
			})
		}
	}
}

func TestWriteMessageShortBuffer(t *testing.T) {
	c := New(&loopConn{}, nil, true, 0)
	require.ErrorIs(t, c.WriteMessage(make([]byte, HeaderRoom-1)), io.ErrShortBuffer)
	require.NoError(t, c.WriteMessage(make([]byte, HeaderRoom)), "an empty message is fine")
}

type failConn struct {
	net.Conn
	writes int
}

var errBroken = errors.New("broken pipe")

func (f *failConn) Write(p []byte) (int, error) { f.writes++; return 0, errBroken }

func TestWriteErrorIsSticky(t *testing.T) {
	fc := &failConn{}
	c := New(fc, nil, false, 0)
	require.ErrorIs(t, c.WriteMessage(make([]byte, HeaderRoom+1)), errBroken)
	require.ErrorIs(t, c.WriteMessage(make([]byte, HeaderRoom+1)), errBroken)
	require.ErrorIs(t, c.WriteClose(ws.StatusNormalClosure, ""), errBroken)
	require.Equal(t, 1, fc.writes)
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

func TestZeroAllocsSteadyState(t *testing.T) {
	for _, n := range []int{1, 1000, 16 << 10, 256 << 10} {
		for _, client := range []bool{true, false} {
			t.Run(roleName(client)+"-writes/"+itoa(n), func(t *testing.T) {
				lc := &loopConn{}
				w := New(lc, nil, client, 0)
				r := New(lc, nil, !client, 0)
				buf := append(make([]byte, HeaderRoom), pattern(1, n)...)
				step := func() {
					if err := w.FlushControl(); err != nil {
						panic(err)
					}
					if err := w.WriteMessage(buf); err != nil {
						panic(err)
					}
					msg, err := r.ReadMessage()
					if err != nil || len(msg) != n {
						panic(err)
					}
				}
				step() // grow the buffers
				require.Zero(t, testing.AllocsPerRun(200, step))
			})
		}
	}
}

// Pings answered with pongs do not allocate either.
func TestZeroAllocsPingPong(t *testing.T) {
	for _, client := range []bool{true, false} {
		t.Run(roleName(client), func(t *testing.T) {
			in := rawFrame(ws.OpPing, true, 0, !client, []byte("keepalive"))
			data := rawFrame(ws.OpBinary, true, 0, !client, []byte("payload"))
			src := &bytes.Reader{}
			wire := append(bytes.Clone(in), data...)
			nc := &bufConn{r: src}
			c := New(nc, nil, client, 0)
			step := func() {
				src.Reset(wire)
				if _, err := c.ReadMessage(); err != nil {
					panic(err)
				}
				nc.w.Reset()
				if err := c.FlushControl(); err != nil {
					panic(err)
				}
			}
			step()
			require.Zero(t, testing.AllocsPerRun(200, step))
			frames := decodeFrames(t, nc.w.Bytes())
			require.Len(t, frames, 1)
			require.Equal(t, "keepalive", string(frames[0].Payload))
		})
	}
}

func TestErrorStrings(t *testing.T) {
	require.Contains(t, (&ProtocolError{Close: 1002, Reason: "bad"}).Error(), "1002")
	require.Contains(t, (&CloseError{Code: 1000}).Error(), "1000")
}

func itoa(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
