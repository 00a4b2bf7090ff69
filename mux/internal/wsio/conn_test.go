package wsio

import (
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
	"github.com/wsmux/wsmux/internal/testkit/require"

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
