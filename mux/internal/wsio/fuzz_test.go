package wsio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/fuzz/wsref"
)

// FuzzWebSocketFrame is a differential fuzz target: a byte stream of
// WebSocket frames (headers as gobwas/ws encodes and decodes them, and
// anything else) goes through Conn.ReadMessage and through wsref, an
// independent reader written from RFC 6455 and this package's documented
// policy; the messages, the pong and close replies queued for the writer,
// and the way the stream ends must agree. It lives here, not in package
// fuzz, because package fuzz cannot import an internal package of mux (see
// docs/fuzzing.md); it is in package wsio so that go-118-fuzz-build
// (OSS-Fuzz) can build it.
//
// Input: byte 0 selects the role (bit 0: client, i.e. expects unmasked
// frames) and the message bound (bits 1-2); byte 1 caps each Read of the
// connection (0: unlimited), exercising short reads; the rest is the wire.
//
//	go test -run='^$' -fuzz='^FuzzWebSocketFrame$' ./mux/internal/wsio/
func FuzzWebSocketFrame(f *testing.F) {
	for _, s := range wsSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := webSocketDiff(data); err != nil {
			t.Fatal(err)
		}
	})
}

// wsMaxMessages are the message bounds byte 0 selects.
var wsMaxMessages = [4]int{DefaultMaxMessage, 200, 64 << 10, 1}

// webSocketDiff runs one input of FuzzWebSocketFrame and returns the first
// disagreement between Conn and wsref.
func webSocketDiff(data []byte) error {
	data = data[:len(data):len(data)]
	if len(data) < 2 || len(data) > 256<<10 {
		return nil
	}
	client := data[0]&1 != 0
	maxMsg := wsMaxMessages[data[0]>>1&3]
	chunk := int(data[1])
	wire := data[2:]

	want := wsref.Read(wire, !client, maxMsg)
	var r io.Reader = bytes.NewReader(wire)
	if chunk > 0 {
		r = &chunkReader{r: r, n: chunk}
	}
	c := New(&bufConn{r: r}, nil, client, maxMsg)
	var got [][]byte
	var err error
	for {
		var m []byte
		m, err = c.ReadMessage()
		if err != nil {
			break
		}
		if len(got) >= len(want.Messages) {
			return fmt.Errorf("message %d %q: the reference ends with %v (%s)", len(got), trunc(m), want.End.Err, want.End.Why)
		}
		if !bytes.Equal(m, want.Messages[len(got)]) {
			return fmt.Errorf("message %d: got %q, want %q", len(got), trunc(m), trunc(want.Messages[len(got)]))
		}
		got = append(got, bytes.Clone(m))
		if len(m) > maxMsg {
			return fmt.Errorf("message of %d bytes over the bound %d", len(m), maxMsg)
		}
	}
	if len(got) != len(want.Messages) {
		return fmt.Errorf("got %d messages then %v, want %d then %v (%s)", len(got), err, len(want.Messages), want.End.Err, want.End.Why)
	}
	if _, again := c.ReadMessage(); again != err {
		return fmt.Errorf("error not sticky: %v then %v", err, again)
	}
	var pe *ProtocolError
	var ce *CloseError
	switch w := want.End; {
	case w.Err == wsref.ErrProtocol:
		if !errors.As(err, &pe) || uint16(pe.Close) != w.Code {
			return fmt.Errorf("ended with %v, want a protocol error with close %d (%s)", err, w.Code, w.Why)
		}
	case w.Err == wsref.ErrClose:
		if !errors.As(err, &ce) || uint16(ce.Code) != w.Code || ce.Reason != w.Reason {
			return fmt.Errorf("ended with %v, want the peer's close %d %q", err, w.Code, w.Reason)
		}
	default:
		if err != w.Err {
			return fmt.Errorf("ended with %v, want %v", err, w.Err)
		}
	}
	// Replies queued for the writer: the latest ping's payload as a pong,
	// and an echo of a valid close.
	bits := c.pending.Load()
	if (bits&pendPong != 0) != (len(want.Pings) > 0) {
		return fmt.Errorf("pong queued %v after %d pings", bits&pendPong != 0, len(want.Pings))
	}
	if len(want.Pings) > 0 {
		if last := want.Pings[len(want.Pings)-1]; !bytes.Equal(c.pong[:c.pongLen], last) {
			return fmt.Errorf("pong payload %q, want the last ping's %q", c.pong[:c.pongLen], last)
		}
	}
	if (bits&pendClose != 0) != (want.End.Err == wsref.ErrClose) {
		return fmt.Errorf("close reply queued %v, end %v", bits&pendClose != 0, err)
	}
	if want.End.Err == wsref.ErrClose {
		echo := ws.StatusCode(want.End.Code)
		if echo == ws.StatusNoStatusRcvd {
			echo = 0
		}
		if c.closeCode != echo {
			return fmt.Errorf("close echo %d, want %d", c.closeCode, echo)
		}
	}
	if c.BytesRead() > uint64(len(wire)) {
		return fmt.Errorf("BytesRead %d of a %d-byte stream", c.BytesRead(), len(wire))
	}
	return nil
}

func trunc(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// wsSeeds are the hand-picked seeds of FuzzWebSocketFrame (the recorded
// sessions are files under testdata/fuzz/FuzzWebSocketFrame/).
func wsSeeds() [][]byte {
	key := [4]byte{1, 2, 3, 4}
	srv := func(chunk byte, frames ...[]byte) []byte { return append([]byte{0, chunk}, bytes.Join(frames, nil)...) }
	cli := func(chunk byte, frames ...[]byte) []byte { return append([]byte{1, chunk}, bytes.Join(frames, nil)...) }
	m := func(fin bool, op byte, p []byte) []byte { return wsref.AppendFrame(nil, fin, op, true, key, p) }
	u := func(fin bool, op byte, p []byte) []byte { return wsref.AppendFrame(nil, fin, op, false, key, p) }
	big := bytes.Repeat([]byte("x"), 300)
	return [][]byte{
		srv(0, m(true, 2, []byte("hello"))),
		cli(3, u(true, 2, []byte("hello")), u(true, 2, nil)),
		srv(1, m(false, 2, []byte("ab")), m(true, 9, []byte("ping")), m(true, 0, []byte("cd")), m(true, 10, nil)),
		srv(7, m(true, 2, bytes.Repeat([]byte("y"), 126)), m(true, 2, bytes.Repeat([]byte("z"), 125))),
		{2, 0, 0x82, 0xfe, 0, 201, 1, 2, 3, 4},                        // 126-form length over a 200-byte bound
		{0, 0, 0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4},     // 64-bit length with the MSB set
		{0, 0, 0x82, 0xfe, 0, 5, 1, 2, 3, 4, 'a', 'b', 'c', 'd', 'e'}, // non-minimal length form
		srv(0, m(true, 1, []byte("text"))),
		srv(0, m(true, 8, []byte{0x03, 0xe8, 'b', 'y', 'e'})),
		srv(0, m(true, 8, []byte{0x03, 0xed})),
		srv(0, m(true, 8, []byte{0x0f, 0xa0, 0xff})),
		srv(0, m(true, 8, nil)),
		srv(0, m(true, 0, []byte("x"))),
		srv(0, u(true, 2, []byte("x"))),
		cli(0, m(true, 2, []byte("x"))),
		srv(0, []byte{0xc2, 0x80, 1, 2, 3, 4}),
		srv(0, m(true, 3, nil)),
		srv(0, m(false, 9, nil)),
		srv(0, m(false, 2, nil), m(true, 2, nil)),
		srv(0, m(false, 2, big[:130]), m(true, 0, big[130:])),
		{0, 0, 0x82, 0xff, 0, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 'a', 'b', 'c'}, // 64-bit form of a short length
		{6, 0, 0x82, 0xfe},
		{1, 0, 0x82},
		cli(0, u(true, 9, bytes.Repeat([]byte("p"), 126))),
	}
}

// TestWebSocketFrameRegressions replays, by name, every input
// FuzzWebSocketFrame ever failed on (each is also a file under
// testdata/fuzz/FuzzWebSocketFrame/, replayed by go test as a seed).
func TestWebSocketFrameRegressions(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		// A stream that ends after the first two bytes of a header whose
		// length needs more bytes: gobwas/ws's second read returned io.EOF
		// and ReadMessage passed it on, as if the stream had ended between
		// frames; it must be io.ErrUnexpectedEOF.
		{"eof-inside-extended-header", []byte{6, 0, 0x82, 0xfe}},
		{"eof-inside-masked-header", []byte{0, 0, 0x82, 0x85, 1, 2}},
		{"eof-after-two-header-bytes-of-64-bit-length", []byte{0, 1, 0x82, 0xff}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := webSocketDiff(tt.in); err != nil {
				t.Fatal(err)
			}
		})
	}
}
