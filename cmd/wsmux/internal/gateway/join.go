package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/gobwas/ws"
)

// Kubernetes' wsstream.Conn, which serves the v5 and v4 channel protocols
// here, reads with golang.org/x/net/websocket, and that takes every frame
// for a whole message: the fragments of a message that a client sends in
// several frames arrive as separate messages, the first payload byte of
// each continuation is taken for a channel number, and the bytes are
// dropped without a word (a stdin short by a few KiB, an exec that never
// ends). Browsers fragment large messages, and so does a gorilla/websocket
// client whose message outgrows its write buffer (client-go sizes its
// buffer to avoid that). The gateway therefore joins a client's fragmented
// messages into one frame before wsstream reads them.

// maxJoined bounds a message the gateway joins from fragments: the largest
// frame golang.org/x/net/websocket reads by default
// (websocket.DefaultMaxPayloadBytes), so joining accepts no message that an
// unfragmented frame could not carry.
const maxJoined = 32 << 20

// errJoin reports a client's frames that cannot be joined: the connection
// ends (wsstream logs the read error and closes it).
type errJoin struct{ reason string }

func (e *errJoin) Error() string { return "wsmux gateway: WebSocket fragments: " + e.reason }

// joiningWriter hands a WebSocket server that hijacks it a connection whose
// reads join fragmented messages (joinConn).
type joiningWriter struct{ http.ResponseWriter }

// Hijack takes over the connection and wraps its reading side.
func (w joiningWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	jc := &joinConn{Conn: conn, src: brw.Reader}
	return jc, bufio.NewReadWriter(bufio.NewReader(jc), brw.Writer), nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w joiningWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// joinConn is the client's side of a hijacked WebSocket connection with
// each fragmented data message handed out as one frame: unfragmented frames
// and control frames (which may come between fragments) pass as they came,
// streamed; the fragments of a message are unmasked, kept until the last
// one (at most maxJoined bytes), and handed out as a single frame masked
// with a fresh key. Writes go straight to the connection.
type joinConn struct {
	net.Conn
	src *bufio.Reader // the hijacked reader: it may hold bytes read already

	out    []byte // a frame header to hand out before reading on
	outOff int
	tail   []byte // then a joined message's payload
	pass   int64  // or the payload bytes of a passed-through frame still to copy

	joining bool
	first   ws.Header // the fragmented message's first frame
	msg     []byte    // its payload so far, unmasked

	hdr [ws.MaxHeaderSize]byte
	enc bytes.Buffer
	err error // sticky: the stream of frames is broken
}

// Read hands out the client's frames with fragmented messages joined.
func (c *joinConn) Read(p []byte) (int, error) {
	for {
		switch {
		case c.outOff < len(c.out):
			n := copy(p, c.out[c.outOff:])
			c.outOff += n
			return n, nil
		case len(c.tail) > 0:
			n := copy(p, c.tail)
			c.tail = c.tail[n:]
			return n, nil
		case c.pass > 0:
			n, err := c.src.Read(p[:min(int64(len(p)), c.pass)])
			c.pass -= int64(n)
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		case c.err != nil:
			return 0, c.err
		}
		c.err = c.next()
	}
}

// next reads the next frame header and sets up what Read hands out.
func (c *joinConn) next() error {
	h, err := ws.ReadHeaderBuffer(c.src, c.hdr[:])
	if err != nil {
		if err == io.EOF && c.joining {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	switch {
	case h.OpCode.IsControl(), !c.joining && h.Fin && h.OpCode != ws.OpContinuation:
		c.emit(h, nil)
		c.pass = h.Length
		return nil
	case !c.joining && h.OpCode == ws.OpContinuation:
		return &errJoin{"a continuation frame outside a fragmented message"}
	case c.joining && h.OpCode != ws.OpContinuation:
		return &errJoin{"a new message before the last fragment of the previous one"}
	case h.Length > int64(maxJoined-len(c.msg)):
		return &errJoin{fmt.Sprintf("a fragmented message over %d MiB", maxJoined>>20)}
	}
	if !c.joining {
		c.joining, c.first, c.msg = true, h, c.msg[:0]
	}
	n := len(c.msg)
	c.msg = append(c.msg, make([]byte, h.Length)...)
	if _, err := io.ReadFull(c.src, c.msg[n:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if h.Masked {
		ws.Cipher(c.msg[n:], h.Mask, 0)
	}
	if !h.Fin {
		return nil
	}
	j := ws.Header{Fin: true, Rsv: c.first.Rsv, OpCode: c.first.OpCode, Length: int64(len(c.msg)), Masked: c.first.Masked}
	if j.Masked {
		j.Mask = ws.NewMask()
		ws.Cipher(c.msg, j.Mask, 0)
	}
	c.emit(j, c.msg)
	c.joining = false
	c.msg = nil // handed out; the next fragmented message starts afresh
	return nil
}

// emit sets the frame of h, with payload (nil when the payload is passed
// through from src), as what Read hands out next.
func (c *joinConn) emit(h ws.Header, payload []byte) {
	c.enc.Reset()
	_ = ws.WriteHeader(&c.enc, h) // a bytes.Buffer does not fail
	c.out, c.outOff, c.tail = c.enc.Bytes(), 0, payload
}
