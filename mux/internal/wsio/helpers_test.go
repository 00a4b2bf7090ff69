package wsio

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/gobwas/ws"
	"github.com/wsmux/wsmux/internal/testkit/leakcheck"
	"github.com/wsmux/wsmux/internal/testkit/require"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// testMask is the mask the raw test peer uses; a fixed one keeps failures
// reproducible.
var testMask = [4]byte{0x37, 0xfa, 0x21, 0x3d}

// rawFrame encodes one frame by hand (gobwas ws.WriteHeader and ws.Cipher),
// the way a peer, well-behaved or not, would put it on the wire.
func rawFrame(op ws.OpCode, fin bool, rsv byte, masked bool, payload []byte) []byte {
	h := ws.Header{Fin: fin, Rsv: rsv, OpCode: op, Length: int64(len(payload)), Masked: masked}
	if masked {
		h.Mask = testMask
	}
	var b bytes.Buffer
	if err := ws.WriteHeader(&b, h); err != nil {
		panic(err)
	}
	p := bytes.Clone(payload)
	if masked {
		ws.Cipher(p, h.Mask, 0)
	}
	b.Write(p)
	return b.Bytes()
}

// rawHeader encodes only a frame header declaring length payload bytes.
func rawHeader(op ws.OpCode, fin bool, masked bool, length int64) []byte {
	h := ws.Header{Fin: fin, OpCode: op, Length: length, Masked: masked}
	if masked {
		h.Mask = testMask
	}
	var b bytes.Buffer
	if err := ws.WriteHeader(&b, h); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// decodedFrame is one frame read back from what a Conn wrote.
type decodedFrame struct {
	ws.Header
	Payload []byte // unmasked
}

// decodeFrames parses everything a Conn wrote into frames, unmasking them.
func decodeFrames(t testing.TB, wire []byte) []decodedFrame {
	t.Helper()
	r := bytes.NewReader(wire)
	var out []decodedFrame
	for r.Len() > 0 {
		h, err := ws.ReadHeader(r)
		require.NoError(t, err)
		p := make([]byte, h.Length)
		_, err = io.ReadFull(r, p)
		require.NoError(t, err)
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		out = append(out, decodedFrame{Header: h, Payload: p})
	}
	return out
}

// bufConn is a net.Conn reading from r and writing into w, all in the
// calling goroutine. Methods other than Read, Write and Close are not used.
type bufConn struct {
	net.Conn
	r io.Reader
	w bytes.Buffer
}

func newBufConn(in ...[]byte) *bufConn {
	return &bufConn{r: bytes.NewReader(bytes.Join(in, nil))}
}

func (c *bufConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *bufConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *bufConn) Close() error                { return nil }

// loopConn is a net.Conn whose reads return what was written to it: a
// writer Conn and a reader Conn share one to exchange messages in one
// goroutine without allocating.
type loopConn struct {
	net.Conn
	b bytes.Buffer
}

func (c *loopConn) Read(p []byte) (int, error)  { return c.b.Read(p) }
func (c *loopConn) Write(p []byte) (int, error) { return c.b.Write(p) }
func (c *loopConn) Close() error                { return nil }

// guardReader returns its data, then fails the test run's expectations by
// returning errReadPastData if anything reads further.
type guardReader struct {
	data []byte
}

var errReadPastData = io.ErrNoProgress

func (g *guardReader) Read(p []byte) (int, error) {
	if len(g.data) == 0 {
		return 0, errReadPastData
	}
	n := copy(p, g.data)
	g.data = g.data[n:]
	return n, nil
}

// pattern fills a payload of n bytes that differs per message seed.
func pattern(seed, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(seed*31 + i*7 + i>>8)
	}
	return p
}

// roleName names a role for subtests.
func roleName(client bool) string {
	if client {
		return "client"
	}
	return "server"
}
