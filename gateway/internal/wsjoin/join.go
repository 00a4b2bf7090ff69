// Package wsjoin joins the fragments of WebSocket messages that a client
// sends, for servers that take each frame for a whole message: Kubernetes'
// wsstream (golang.org/x/net/websocket underneath), which serves the
// v5.channel.k8s.io and v4 channel protocols in the gateway. It wraps the
// http.ResponseWriter such a server hijacks. It knows no Kubernetes and
// must not import the rest of wsmux.
package wsjoin

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"

	"github.com/gobwas/ws"
)

// Why: golang.org/x/net/websocket's Message.Receive reads one frame, so
// the fragments of a message sent in several frames arrive as separate
// messages; wsstream then takes the first payload byte of each
// continuation for a channel number and drops the bytes without a word (a
// stdin short by a few KiB, an exec that never ends). Browsers fragment
// large messages, and so does a gorilla/websocket client whose message
// outgrows its write buffer (client-go sizes its buffer to avoid that).

// MaxMessage bounds a message joined from fragments: the largest frame
// golang.org/x/net/websocket reads by default (DefaultMaxPayloadBytes), so
// joining accepts no message that one unfragmented frame could not carry.
const MaxMessage = 32 << 20

// growStep is how much of a fragment is read (and the buffer grown) at a time.
const growStep = 64 << 10

// Error reports a client's frames that cannot be joined. Reads return it
// from then on: the server sees a read error and ends the connection.
type Error struct{ Reason string }

func (e *Error) Error() string { return "WebSocket fragments: " + e.Reason }

// Writer returns w for a WebSocket server that hijacks it: the connection
// it gets hands out each fragmented message of the client as one frame.
func Writer(w http.ResponseWriter) http.ResponseWriter { return joiningWriter{w} }

type joiningWriter struct{ http.ResponseWriter }

// Hijack takes over the connection and wraps its reading side.
func (w joiningWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	jc := NewConn(conn, brw.Reader)
	return jc, bufio.NewReadWriter(bufio.NewReader(jc), brw.Writer), nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w joiningWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// NewConn returns conn, as a server reads it, with src (conn's reader,
// which may hold bytes read already) read through a Conn.
func NewConn(conn net.Conn, src *bufio.Reader) *Conn { return &Conn{Conn: conn, src: src} }

// Conn is the client's side of a hijacked WebSocket connection with
// each fragmented data message handed out as one frame: unfragmented frames
// and control frames (which may come between fragments) pass as they came,
// streamed; the fragments of a message are unmasked, kept until the last
// one (at most MaxMessage bytes), and handed out as a single frame masked
// with a fresh key. Writes go straight to the connection.
type Conn struct {
	net.Conn
	src *bufio.Reader // the hijacked reader: it may hold bytes read already

	out  []byte // what is left of a frame header to hand out before reading on
	tail []byte // then of a joined message's payload
	pass int64  // or the payload bytes of a passed-through frame still to copy

	joining bool
	first   ws.Header // the fragmented message's first frame
	msg     []byte    // its payload so far, unmasked

	hdr [ws.MaxHeaderSize]byte
	enc bytes.Buffer
	err error // sticky: the stream of frames is broken
}

// Read hands out the client's frames with fragmented messages joined.
func (c *Conn) Read(p []byte) (int, error) {
	for {
		switch {
		case len(c.out) > 0:
			n := copy(p, c.out)
			c.out = c.out[n:]
			return n, nil
		case len(c.tail) > 0:
			n := copy(p, c.tail)
			c.tail = c.tail[n:]
			return n, nil
		case c.pass > 0:
			n, err := c.src.Read(p[:min(int64(len(p)), c.pass)])
			c.pass -= int64(n)
			return n, cutShort(err)
		case c.err != nil:
			return 0, c.err
		}
		c.err = c.next()
	}
}

// next reads the next frame header and sets up what Read hands out.
func (c *Conn) next() error {
	h, err := ws.ReadHeaderBuffer(c.src, c.hdr[:])
	if err != nil {
		if c.joining {
			return cutShort(err)
		}
		return err
	}
	switch {
	case h.OpCode.IsControl(), !c.joining && h.Fin && h.OpCode != ws.OpContinuation:
		c.emit(h, nil)
		c.pass = h.Length
		return nil
	case !c.joining && h.OpCode == ws.OpContinuation:
		return &Error{"a continuation frame outside a fragmented message"}
	case c.joining && h.OpCode != ws.OpContinuation:
		return &Error{"a new message before the last fragment of the previous one"}
	case h.Length > int64(MaxMessage-len(c.msg)):
		return &Error{fmt.Sprintf("a fragmented message over %d MiB", MaxMessage>>20)}
	}
	if !c.joining {
		c.joining, c.first, c.msg = true, h, c.msg[:0]
	}
	n := len(c.msg)
	// The buffer grows as bytes arrive, not by what the header claims.
	for left := int(h.Length); left > 0; {
		k := min(left, growStep)
		m := len(c.msg)
		c.msg = slices.Grow(c.msg, k)[:m+k]
		if _, err := io.ReadFull(c.src, c.msg[m:]); err != nil {
			return cutShort(err)
		}
		left -= k
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
func (c *Conn) emit(h ws.Header, payload []byte) {
	c.enc.Reset()
	_ = ws.WriteHeader(&c.enc, h) // a bytes.Buffer does not fail
	c.out, c.tail = c.enc.Bytes(), payload
}

// cutShort is err for a read inside a frame or a message: the end of the
// connection there is io.ErrUnexpectedEOF.
func cutShort(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
