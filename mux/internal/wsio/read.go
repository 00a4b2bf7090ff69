package wsio

import (
	"encoding/binary"
	"io"

	"github.com/gobwas/ws"
)

// The read side: messages reassembled from frames, the message buffer
// policy, and the control frames the reader answers.

// Read buffer policy. The message buffer starts empty and grows, as payload
// bytes actually arrive, by doubling (at least minMessageBuffer, and at most
// growAhead bytes beyond what has been received), never past maxMessage. A
// peer's declared frame length is therefore never an allocation size by
// itself: a frame that declares 1 MiB and sends nothing costs nothing.
//
// Once the buffer is larger than shrinkAbove, each message that fits in
// shrinkAbove counts as small; after shrinkAfter small messages in a row the
// buffer goes back to a pool at the start of the next ReadMessage and grows
// again from minMessageBuffer. A session that moved one burst of large
// messages and then went quiet keeps at most shrinkAbove-ish bytes after a
// few keepalive pings instead of MaxMessageSize. Buffers come from pools of
// power-of-two sizes (msgbuf.go), so a session whose traffic alternates
// between bursts and quiet runs regrows without allocating.
const (
	readBufferSize   = 4 << 10  // bufio.Reader in front of the socket: small messages cost one read syscall
	minMessageBuffer = 4 << 10  // first allocation of the message buffer
	growAhead        = 64 << 10 // at most this many bytes are allocated beyond those received
	shrinkAbove      = 64 << 10 // buffers above this size are candidates for shrinking
	shrinkAfter      = 32       // consecutive small messages before a large buffer is released
)

// ReadMessage returns the next complete binary message, reassembled from
// continuation frames and unmasked in place. The slice is valid until the next
// ReadMessage (its buffer may then go back to a pool).
//
// Control frames between or inside fragmented messages are handled: a ping
// queues a pong for the writer (the latest ping's payload wins if several
// arrive before the writer flushes), a pong is ignored (its bytes still count
// in BytesRead), and a close queues a close reply echoing the peer's code and
// returns a *CloseError.
//
// Every violation returns a *ProtocolError with the close code to send: text
// frame (1003); reserved opcode, RSV bits, wrong mask bit for the role, a
// control frame over 125 bytes or fragmented, a continuation without a start
// or a new data frame inside a fragmented message, an invalid close payload
// (1002); a message over maxMessage (1009, decided from the declared length
// before any of the payload is read). I/O errors are returned as they are
// (io.EOF when the connection ends between frames, io.ErrUnexpectedEOF
// inside a frame or a fragmented message).
//
// The message buffer grows with the bytes that actually arrive (never to a
// peer-declared length) up to maxMessage, and is released again after a run of
// small messages (see the read buffer policy constants), so an idle session
// does not keep a MaxMessageSize buffer.
//
// Errors are sticky: once ReadMessage has failed it returns the same error.
func (c *Conn) ReadMessage() ([]byte, error) {
	if c.rerr != nil {
		return nil, c.rerr
	}
	msg, err := c.readMessage()
	if err != nil {
		c.rerr = err
		return nil, err
	}
	return msg, nil
}

// Wait blocks until the first byte of the next frame is here (or an error).
// It consumes nothing, and an error from it is not sticky: a read deadline
// that expires during Wait leaves the connection as it was, so a reader can
// be interrupted between messages (the mux's leader reads). Call it only
// between messages (after ReadMessage returned). A sticky read error is
// returned as it is.
func (c *Conn) Wait() error {
	if c.rerr != nil {
		return c.rerr
	}
	_, err := c.rd.Peek(1)
	return err
}

// Buffered reports how many bytes are already read from the socket and not
// yet consumed: with none, the next ReadMessage waits on the socket.
func (c *Conn) Buffered() int {
	return c.rd.Buffered()
}

func (c *Conn) readMessage() ([]byte, error) {
	if c.shrink {
		putMessageBuffer(c.bufp)
		c.buf, c.bufp = nil, nil
		c.shrink = false
		c.smallRun = 0
	}
	n := 0 // message bytes received so far
	state := c.state
	for {
		if c.onMsg == nil && !state.Fragmented() {
			// A header's first byte is here before ReadHeaderBuffer
			// starts, so an io.EOF from it is an end inside the header.
			if _, err := c.rd.Peek(1); err != nil {
				return nil, err
			}
		}
		if c.onMsg != nil && !state.Fragmented() {
			// The clock of a partly received message starts with its
			// first byte, not when we begin to wait for it.
			if _, err := c.rd.Peek(1); err != nil {
				return nil, err
			}
			c.onMsg(true)
		}
		h, err := ws.ReadHeaderBuffer(c.rd, c.hdr[:])
		if err != nil {
			if err == ws.ErrHeaderLengthMSB || err == ws.ErrHeaderLengthUnexpected {
				return nil, &ProtocolError{Close: ws.StatusProtocolError, Reason: err.Error()}
			}
			if err == io.EOF { // inside a header (peeked above) or a fragmented message
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		c.nRead.Add(uint64(ws.HeaderSize(h)))

		if err := ws.CheckHeader(h, state); err != nil {
			return nil, &ProtocolError{Close: ws.StatusProtocolError, Reason: err.Error()}
		}
		if h.OpCode.IsControl() {
			if err := c.readControl(h); err != nil {
				return nil, err
			}
			if c.onMsg != nil && !state.Fragmented() {
				c.onMsg(false)
			}
			continue
		}
		if h.OpCode == ws.OpText {
			return nil, &ProtocolError{Close: ws.StatusUnsupportedData, Reason: "text frame (WSMUX/1 sends binary messages only)"}
		}
		// A binary frame that starts a message or a continuation of one.
		if h.Length > int64(c.maxMessage-n) {
			return nil, &ProtocolError{Close: ws.StatusMessageTooBig, Reason: "message exceeds the maximum message size"}
		}
		length := int(h.Length)
		if err := c.readPayload(n, n+length); err != nil {
			return nil, err
		}
		if h.Masked {
			ws.Cipher(c.buf[n:n+length], h.Mask, 0)
		}
		n += length
		if h.Fin {
			c.account(n)
			if c.onMsg != nil {
				c.onMsg(false)
			}
			return c.buf[:n:n], nil
		}
		state = state.Set(ws.StateFragmented)
	}
}

// readPayload reads the bytes of c.buf[off:end] from the wire, growing c.buf
// only as bytes actually arrive (see the read buffer policy above).
func (c *Conn) readPayload(off, end int) error {
	for off < end {
		if off == len(c.buf) {
			c.grow(off, end)
		}
		m, err := io.ReadFull(c.rd, c.buf[off:min(end, len(c.buf))])
		off += m
		c.nRead.Add(uint64(m))
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// grow replaces c.buf by a larger buffer holding its first have bytes; need
// is the end of the frame being read (need <= maxMessage).
func (c *Conn) grow(have, need int) {
	size := max(2*len(c.buf), have+min(need-have, growAhead), minMessageBuffer)
	size = min(size, max(c.maxMessage, minMessageBuffer))
	np := getMessageBuffer(size)
	copy(*np, c.buf[:have])
	putMessageBuffer(c.bufp)
	c.buf, c.bufp = *np, np
}

// account applies the shrink policy after a message of n bytes.
func (c *Conn) account(n int) {
	if len(c.buf) <= shrinkAbove {
		c.smallRun = 0
		return
	}
	if n > shrinkAbove {
		c.smallRun = 0
		return
	}
	c.smallRun++
	if c.smallRun >= shrinkAfter {
		c.shrink = true
	}
}

// readControl reads and handles the payload of a control frame whose header
// CheckHeader accepted (final, at most 125 bytes).
func (c *Conn) readControl(h ws.Header) error {
	p := c.ctlIn[:h.Length]
	m, err := io.ReadFull(c.rd, p)
	c.nRead.Add(uint64(m))
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	switch h.OpCode {
	case ws.OpPing:
		c.mu.Lock()
		c.pongLen = copy(c.pong[:], p)
		c.mu.Unlock()
		c.queue(pendPong)
		return nil
	case ws.OpPong:
		return nil
	case ws.OpClose:
		return c.handleClose(p)
	default:
		// CheckHeader rejects reserved opcodes; unreachable.
		return &ProtocolError{Close: ws.StatusProtocolError, Reason: "unknown control opcode"}
	}
}

func (c *Conn) handleClose(p []byte) error {
	code := ws.StatusNoStatusRcvd
	reason := ""
	var echo ws.StatusCode
	switch {
	case len(p) == 1:
		return &ProtocolError{Close: ws.StatusProtocolError, Reason: "close frame with a 1-byte payload"}
	case len(p) >= 2:
		code = ws.StatusCode(binary.BigEndian.Uint16(p))
		reason = string(p[2:])
		if err := ws.CheckCloseFrameData(code, reason); err != nil {
			return &ProtocolError{Close: ws.StatusProtocolError, Reason: "invalid close frame: " + err.Error()}
		}
		if code >= 5000 {
			return &ProtocolError{Close: ws.StatusProtocolError, Reason: "invalid close frame: status code out of range"}
		}
		echo = code
	}
	if !c.closeSent.Load() {
		c.mu.Lock()
		c.closeCode = echo
		c.mu.Unlock()
		c.queue(pendClose)
	}
	return &CloseError{Code: code, Reason: reason}
}

// queue marks a control reply pending and wakes the writer if nothing was.
func (c *Conn) queue(bit uint32) {
	if c.pending.Or(bit) == 0 && c.notify != nil {
		c.notify()
	}
}
