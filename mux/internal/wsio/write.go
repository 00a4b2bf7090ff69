package wsio

import (
	"encoding/binary"
	"io"
	"unicode/utf8"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/mux/internal/pool"
)

// The write side: messages framed and masked in the caller's buffer,
// spliced segments, queued control replies and the close frame.

// nopWriter lets ws.WriteHeaderBuffer encode a header into a caller's buffer
// without sending it anywhere.
type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// frame encodes a final frame header for op and buf[HeaderRoom:] right-aligned
// into buf[:HeaderRoom], masks the payload in place on a client, and returns
// where the frame starts in buf.
func (c *Conn) frame(buf []byte, op ws.OpCode) int {
	start, mask := c.header(buf, op, len(buf)-HeaderRoom)
	if c.client {
		ws.Cipher(buf[HeaderRoom:], mask, 0)
	}
	return start
}

// header encodes a final frame header for op and a payload of length bytes
// right-aligned into buf[:HeaderRoom] and returns where it starts in buf and,
// on a client, the fresh mask the payload must be masked with.
func (c *Conn) header(buf []byte, op ws.OpCode, length int) (int, [4]byte) {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(length)}
	if c.client {
		h.Masked = true
		h.Mask = ws.NewMask()
	}
	// The header is encoded at buf[0:size] (WriteHeaderBuffer uses its
	// argument as scratch and hands the bytes to nopWriter), then moved next
	// to the payload.
	_ = ws.WriteHeaderBuffer(nopWriter{}, h, buf[:HeaderRoom])
	size := ws.HeaderSize(h)
	start := HeaderRoom - size
	copy(buf[start:HeaderRoom], buf[:size])
	return start, h.Mask
}

// writable returns the error a message in buf cannot be written with, or nil.
func (c *Conn) writable(buf []byte) error {
	switch {
	case c.werr != nil:
		return c.werr
	case len(buf) < HeaderRoom:
		return io.ErrShortBuffer
	case c.closeSent.Load():
		return ErrCloseSent
	}
	return nil
}

// wrote counts n bytes written of want and makes a failure sticky.
func (c *Conn) wrote(n, want int64, err error) error {
	c.nWritten.Add(uint64(n))
	if err == nil && n < want {
		err = io.ErrShortWrite
	}
	if err != nil {
		c.werr = err
	}
	return err
}

// write sends p with one conn.Write; a failure is sticky for the writer.
func (c *Conn) write(p []byte) error {
	n, err := c.conn.Write(p)
	return c.wrote(int64(n), int64(len(p)), err)
}

// WriteMessage sends buf[HeaderRoom:] as one binary WebSocket message with a
// single conn.Write. buf must have HeaderRoom bytes reserved in front of the
// payload (their content is overwritten): the header is written right-aligned
// into that room and, on a client, the payload is masked in place, so buf must
// be the caller's own buffer (never user memory). After it returns the payload
// bytes are garbage on a client. Nothing outside buf is touched.
//
// It returns io.ErrShortBuffer if len(buf) < HeaderRoom, ErrCloseSent once a
// close frame has been sent, and the first write error for good once one
// occurred.
func (c *Conn) WriteMessage(buf []byte) error {
	if err := c.writable(buf); err != nil {
		return err
	}
	start := c.frame(buf, ws.OpBinary)
	return c.write(buf[start:])
}

// Segment is a run of payload bytes that WriteMessageSegments splices into
// a message without copying: Data goes out right after the first At bytes
// of the buffer's payload (At counts from the start of the buffer, header
// room included, and segments are in ascending At order).
type Segment = pool.Segment

// WriteMessageSegments is WriteMessage with segs spliced into the payload:
// the message is buf[HeaderRoom:segs[0].At] + segs[0].Data +
// buf[segs[0].At:segs[1].At] + ... + buf[segs[n-1].At:], written with one
// vectored write (see Vectored). On a client every piece, the segments
// included, is masked in place: they must be the caller's own memory, and
// are garbage afterwards.
func (c *Conn) WriteMessageSegments(buf []byte, segs []Segment) error {
	if len(segs) == 0 {
		return c.WriteMessage(buf)
	}
	if err := c.writable(buf); err != nil {
		return err
	}
	length := len(buf) - HeaderRoom
	for _, sg := range segs {
		length += len(sg.Data)
	}
	start, mask := c.header(buf, ws.OpBinary, length)
	vec := append(c.vec[:0], buf[start:HeaderRoom])
	off, prev := 0, HeaderRoom
	piece := func(p []byte) {
		if len(p) == 0 {
			return
		}
		if c.client {
			ws.Cipher(p, mask, off)
			off += len(p)
		}
		vec = append(vec, p)
	}
	for _, sg := range segs {
		piece(buf[prev:sg.At])
		piece(sg.Data)
		prev = sg.At
	}
	piece(buf[prev:])
	c.vec, c.bufs = vec, vec
	n, err := c.bufs.WriteTo(c.conn)
	clear(vec) // drop the references to the caller's memory
	return c.wrote(n, int64(HeaderRoom-start+length), err)
}

// ControlPending reports whether a pong or a close reply is queued for
// FlushControl (so the writer can refresh its write deadline first).
func (c *Conn) ControlPending() bool {
	return c.pending.Load() != 0
}

// FlushControl writes any queued pong and then any queued close reply, each
// as its own control frame with one conn.Write. The writer calls it before
// each batch; when nothing is queued it costs one atomic load. Nothing is
// written once a close frame has been sent.
func (c *Conn) FlushControl() error {
	if c.pending.Load() == 0 {
		return nil
	}
	if c.werr != nil {
		return c.werr
	}
	bits := c.pending.Swap(0)
	if bits&pendPong != 0 && !c.closeSent.Load() {
		c.mu.Lock()
		n := copy(c.ctlOut[HeaderRoom:], c.pong[:c.pongLen])
		c.mu.Unlock()
		if err := c.writeControl(ws.OpPong, n); err != nil {
			return err
		}
	}
	if bits&pendClose != 0 && !c.closeSent.Swap(true) {
		c.mu.Lock()
		code := c.closeCode
		c.mu.Unlock()
		n := 0
		if code != 0 {
			binary.BigEndian.PutUint16(c.ctlOut[HeaderRoom:], uint16(code))
			n = 2
		}
		return c.writeControl(ws.OpClose, n)
	}
	return nil
}

// writeControl sends a control frame whose n payload bytes are in
// c.ctlOut[HeaderRoom:].
func (c *Conn) writeControl(op ws.OpCode, n int) error {
	buf := c.ctlOut[:HeaderRoom+n]
	start := c.frame(buf, op)
	return c.write(buf[start:])
}

// maxCloseReason is the room for a reason in a close frame: 125 bytes of
// control payload less the 2-byte status code.
const maxCloseReason = ws.MaxControlFramePayloadSize - 2

// WriteClose sends a close frame with code and reason. The reason is
// truncated to 123 bytes (at a UTF-8 character boundary) to fit a control
// frame; a code of 0 sends an empty close payload (and no reason). Only one
// close frame is ever sent: if one was already sent (by WriteClose or as
// FlushControl's reply to the peer's close) WriteClose does nothing and
// returns nil. Queued pongs are not flushed by WriteClose.
func (c *Conn) WriteClose(code ws.StatusCode, reason string) error {
	if c.werr != nil {
		return c.werr
	}
	if c.closeSent.Swap(true) {
		return nil
	}
	n := 0
	if code != 0 {
		if len(reason) > maxCloseReason {
			cut := maxCloseReason
			for cut > 0 && !utf8.RuneStart(reason[cut]) {
				cut--
			}
			reason = reason[:cut]
		}
		binary.BigEndian.PutUint16(c.ctlOut[HeaderRoom:], uint16(code))
		n = 2 + copy(c.ctlOut[HeaderRoom+2:], reason)
	}
	return c.writeControl(ws.OpClose, n)
}
