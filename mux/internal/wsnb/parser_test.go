package wsnb

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gobwas/ws"
	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// result is one thing Next returned, for comparing runs.
type result struct {
	k   Kind
	p   string
	err string
}

// frames encodes frames as a peer of the given role sends them.
func frames(t testing.TB, masked bool, fs ...ws.Frame) []byte {
	var b bytes.Buffer
	for _, f := range fs {
		if masked {
			f = ws.MaskFrameInPlace(ws.Frame{Header: f.Header, Payload: append([]byte(nil), f.Payload...)})
		}
		require.NoError(t, ws.WriteFrame(&b, f))
	}
	return b.Bytes()
}

func frag(op ws.OpCode, fin bool, p string) ws.Frame {
	f := ws.NewFrame(op, fin, []byte(p))
	return f
}

// feed runs in through a parser in chunks of every size from 1 up, and
// checks each run gives the same results as one call with everything.
func feed(t *testing.T, in []byte, client bool, max int) []result {
	t.Helper()
	want := run(in, client, max, len(in)+1)
	for chunk := 1; chunk <= len(in); chunk++ {
		require.Equal(t, want, run(in, client, max, chunk), "chunk %d", chunk)
	}
	return want
}

// run feeds in in chunks of size bytes, each chunk a fresh slice (as a
// read buffer that is reused would be).
func run(in []byte, client bool, max, size int) []result {
	p := NewParser(client, max)
	var out []result
	for off := 0; off < len(in); off += size {
		chunk := append([]byte(nil), in[off:min(off+size, len(in))]...)
		for len(chunk) > 0 {
			n, k, pl, err := p.Next(chunk)
			chunk = chunk[n:]
			if err != nil {
				return append(out, result{k: k, err: err.Error()})
			}
			if k != More {
				out = append(out, result{k: k, p: string(pl)})
			}
		}
	}
	if p.Partial() {
		out = append(out, result{err: "partial"})
	}
	return out
}

func TestParserMessages(t *testing.T) {
	big := string(bytes.Repeat([]byte("0123456789abcdef"), 10000)) // 160000 B: 8-byte length
	mid := big[:300]                                               // 2-byte length
	for _, tc := range []struct {
		name string
		fs   []ws.Frame
		want []result
	}{
		{"one", []ws.Frame{frag(ws.OpBinary, true, "hello")}, []result{{k: Message, p: "hello"}}},
		{"empty", []ws.Frame{frag(ws.OpBinary, true, "")}, []result{{k: Message, p: ""}}},
		{"lengths", []ws.Frame{frag(ws.OpBinary, true, mid), frag(ws.OpBinary, true, big)}, []result{{k: Message, p: mid}, {k: Message, p: big}}},
		{"fragments and control inside", []ws.Frame{
			frag(ws.OpBinary, false, "ab"), frag(ws.OpPing, true, "pp"), frag(ws.OpContinuation, false, ""),
			frag(ws.OpPong, true, ""), frag(ws.OpContinuation, true, "cd"), frag(ws.OpBinary, true, "e"),
		}, []result{{k: Ping, p: "pp"}, {k: Pong}, {k: Message, p: "abcd"}, {k: Message, p: "e"}}},
		{"close", []ws.Frame{frag(ws.OpBinary, true, "x"), ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusGoingAway, "bye"))},
			[]result{{k: Message, p: "x"}, {k: Close, err: (&wsio.CloseError{Code: ws.StatusGoingAway, Reason: "bye"}).Error()}}},
		{"empty close", []ws.Frame{ws.NewCloseFrame(nil)}, []result{{k: Close, err: (&wsio.CloseError{Code: ws.StatusNoStatusRcvd}).Error()}}},
	} {
		for _, client := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/client=%v", tc.name, client), func(t *testing.T) {
				in := frames(t, !client, tc.fs...)
				if len(in) > 1000 {
					for _, size := range []int{1, 7, 1000, 65536, len(in)} {
						require.Equal(t, tc.want, run(in, client, 1<<20, size))
					}
					return
				}
				require.Equal(t, tc.want, feed(t, in, client, 1<<20))
			})
		}
	}
}

// Every violation is a *wsio.ProtocolError with the close code wsio uses,
// found at any chunking, and sticky.
func TestParserViolations(t *testing.T) {
	long := frag(ws.OpPing, true, string(make([]byte, 126)))
	for _, tc := range []struct {
		name   string
		in     []byte
		status ws.StatusCode
	}{
		{"text", frames(t, true, frag(ws.OpText, true, "hi")), ws.StatusUnsupportedData},
		{"unmasked from client", frames(t, false, frag(ws.OpBinary, true, "hi")), ws.StatusProtocolError},
		{"reserved opcode", frames(t, true, frag(ws.OpCode(3), true, "hi")), ws.StatusProtocolError},
		{"rsv bits", func() []byte {
			f := frag(ws.OpBinary, true, "hi")
			f.Header.Rsv = 4
			return frames(t, true, f)
		}(), ws.StatusProtocolError},
		{"long control", frames(t, true, long), ws.StatusProtocolError},
		{"fragmented control", frames(t, true, frag(ws.OpPing, false, "")), ws.StatusProtocolError},
		{"continuation first", frames(t, true, frag(ws.OpContinuation, true, "x")), ws.StatusProtocolError},
		{"new message inside", frames(t, true, frag(ws.OpBinary, false, "x"), frag(ws.OpBinary, true, "y")), ws.StatusProtocolError},
		{"too big declared", []byte{0x82, 0xff, 0, 0, 0, 0, 0, 0x20, 0, 0, 1, 2, 3, 4}, ws.StatusMessageTooBig},
		{"too big in fragments", frames(t, true, frag(ws.OpBinary, false, string(make([]byte, 40000))), frag(ws.OpContinuation, true, string(make([]byte, 40000)))), ws.StatusMessageTooBig},
		{"length msb", []byte{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}, ws.StatusProtocolError},
		{"one-byte close", frames(t, true, frag(ws.OpClose, true, "x")), ws.StatusProtocolError},
		{"bad close code", frames(t, true, ws.NewCloseFrame(ws.NewCloseFrameBody(999, ""))), ws.StatusProtocolError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for size := 1; size <= len(tc.in); size = size*2 + 1 {
				p := NewParser(false, 64<<10)
				var err error
				for off := 0; off < len(tc.in) && err == nil; {
					chunk := append([]byte(nil), tc.in[off:min(off+size, len(tc.in))]...)
					var n int
					n, _, _, err = p.Next(chunk)
					off += n
				}
				var pe *wsio.ProtocolError
				require.True(t, errors.As(err, &pe), "size %d: %v", size, err)
				require.Equal(t, tc.status, pe.Close)
				_, _, _, again := p.Next([]byte{0x82, 0x80, 1, 2, 3, 4})
				require.Equal(t, err, again, "sticky")
				require.Zero(t, p.Holding())
			}
		})
	}
}

// A frame that declares a large length and sends little costs little; a
// partial message's buffer goes back once it is complete.
func TestParserBuffers(t *testing.T) {
	p := NewParser(false, 1<<20)
	in := frames(t, true, frag(ws.OpBinary, true, string(make([]byte, 1<<20-10))))
	n, k, _, err := p.Next(append([]byte(nil), in[:100]...))
	require.NoError(t, err)
	require.Equal(t, 100, n)
	require.Equal(t, More, k)
	require.True(t, p.Partial())
	require.LessOrEqual(t, p.Holding(), 128<<10, "allocated for the declared length")
	rest := append([]byte(nil), in[100:]...)
	for len(rest) > 0 {
		n, k, _, err = p.Next(rest)
		require.NoError(t, err)
		rest = rest[n:]
	}
	require.Equal(t, Message, k)
	require.False(t, p.Partial())
	p.Done()
	require.NotZero(t, p.Holding(), "kept for the next message")
	p.Idle()
	require.Zero(t, p.Holding())
}

// Frame writes what a gobwas reader reads back, masked by role.
func TestFrameRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 125, 126, 65535, 65536, 200000} {
		for _, client := range []bool{false, true} {
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(rand.IntN(256))
			}
			buf := append(make([]byte, HeaderRoom), payload...)
			start := Frame(buf, ws.OpBinary, client)
			got, kinds := run(buf[start:], !client, 1<<20, 4096), Message
			require.Len(t, got, 1, "n=%d client=%v", n, client)
			require.Equal(t, kinds, got[0].k)
			require.Equal(t, string(payload), got[0].p)
		}
	}
}

// Payload read straight into the message buffer (PayloadBuffer,
// PayloadRead) gives the same messages as bytes through Next.
func TestParserDirectPayload(t *testing.T) {
	payload := make([]byte, 300000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	in := frames(t, true, frag(ws.OpBinary, false, string(payload[:100000])), frag(ws.OpPing, true, "p"),
		frag(ws.OpContinuation, true, string(payload[100000:])), frag(ws.OpBinary, true, "tail"))
	p := NewParser(false, 1<<20)
	var got []result
	for off := 0; off < len(in); {
		if dst := p.PayloadBuffer(); len(dst) > 0 {
			n := copy(dst, in[off:min(off+5000, len(in))])
			p.PayloadRead(n)
			off += n
			if !p.FrameDone() {
				continue
			}
		}
		chunk := append([]byte(nil), in[off:min(off+100, len(in))]...)
		n, k, pl, err := p.Next(chunk)
		require.NoError(t, err)
		off += n
		if k != More {
			got = append(got, result{k: k, p: string(pl)})
		}
	}
	require.Equal(t, []result{{k: Ping, p: "p"}, {k: Message, p: string(payload)}, {k: Message, p: "tail"}}, got)
	p.Idle()
	require.Zero(t, p.Holding())
}

// FrameVec's pieces, concatenated, are one frame whose payload is the
// buffer with the segments spliced in at their offsets, masked for a
// client, and parse back to that payload; the segments are not copied
// (a client's are masked in place).
func TestFrameVecRoundTrip(t *testing.T) {
	rnd := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rand.IntN(256))
		}
		return b
	}
	for _, tc := range []struct {
		name string
		buf  int   // payload bytes in the buffer
		at   []int // segment offsets into the buffer's payload (ascending)
		lens []int // segment lengths
	}{
		{"one in the middle", 100, []int{40}, []int{3000}},
		{"at both ends", 30, []int{0, 30}, []int{5000, 70000}},
		{"several", 5000, []int{10, 10, 2000, 4999}, []int{2048, 16384, 4096, 9000}},
		{"empty buffer", 0, []int{0}, []int{126}},
	} {
		for _, client := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s client=%v", tc.name, client), func(t *testing.T) {
				payload := rnd(tc.buf)
				buf := append(make([]byte, HeaderRoom), payload...)
				var segs []wsio.Segment
				var want []byte
				prev := 0
				for i, at := range tc.at {
					data := rnd(tc.lens[i])
					segs = append(segs, wsio.Segment{At: HeaderRoom + at, Data: data})
					want = append(want, payload[prev:at]...)
					want = append(want, data...)
					prev = at
				}
				want = append(want, payload[prev:]...)
				want = append([]byte(nil), want...)
				vec := FrameVec(nil, buf, segs, client)
				for _, sg := range segs {
					found := false
					for _, p := range vec {
						found = found || len(p) > 0 && &p[0] == &sg.Data[0]
					}
					require.True(t, found, "a segment is written from its own memory")
				}
				wire := bytes.Join(vec, nil)
				got := run(wire, !client, 1<<20, 4096)
				require.Len(t, got, 1)
				require.Equal(t, Message, got[0].k)
				require.Equal(t, string(want), got[0].p)
			})
		}
	}
}
