package conformance

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/gobwas/ws"
)

// wsConn is the runner's raw WebSocket: it writes exactly the frames a
// script asks for (valid or not) and reads whole messages, answering
// WebSocket pings and recording the peer's close.
type wsConn struct {
	c      net.Conn
	r      *bufio.Reader
	client bool // we are the WebSocket client: we mask, the peer must not

	pongs     [][]byte // pong payloads received, oldest first
	closeCode int      // the peer's close status; -1 before a close arrived
	closed    bool     // the connection is over (close received, EOF or error)
	endErr    error    // why it ended, when not by a close frame
}

func newWSConn(c net.Conn, r *bufio.Reader, client bool) *wsConn {
	if r == nil {
		r = bufio.NewReader(c)
	}
	return &wsConn{c: c, r: r, client: client, closeCode: -1}
}

// violation is a breach of the spec by the peer, with the section it breaks.
type violation struct {
	section string
	msg     string
}

func (v *violation) Error() string { return v.msg + " (§" + v.section + ")" }

// errEnded reports a read on a connection that is over.
var errEnded = errors.New("connection ended")

// writeFrame writes one WebSocket frame. mask follows the role unless
// wrongMask inverts it.
func (w *wsConn) writeFrame(op ws.OpCode, fin bool, rsv byte, payload []byte, wrongMask bool) error {
	h := ws.Header{Fin: fin, Rsv: rsv, OpCode: op, Length: int64(len(payload))}
	if w.client != wrongMask {
		h.Masked = true
		h.Mask = ws.NewMask()
		p := make([]byte, len(payload))
		copy(p, payload)
		ws.Cipher(p, h.Mask, 0)
		payload = p
	}
	buf := make([]byte, 0, ws.MaxHeaderSize+len(payload))
	hb := make([]byte, ws.MaxHeaderSize)
	n := headerBytes(hb, h)
	buf = append(buf, hb[:n]...)
	buf = append(buf, payload...)
	_, err := w.c.Write(buf)
	return err
}

// writeHeaderOnly writes a binary frame header declaring length payload
// bytes and only the first send of them.
func (w *wsConn) writeHeaderOnly(length int64, first []byte) error {
	h := ws.Header{Fin: true, OpCode: ws.OpBinary, Length: length}
	if w.client {
		h.Masked = true
		h.Mask = ws.NewMask()
		p := make([]byte, len(first))
		copy(p, first)
		ws.Cipher(p, h.Mask, 0)
		first = p
	}
	hb := make([]byte, ws.MaxHeaderSize)
	n := headerBytes(hb, h)
	_, err := w.c.Write(append(hb[:n], first...))
	return err
}

// headerBytes encodes h into b (at least ws.MaxHeaderSize long).
func headerBytes(b []byte, h ws.Header) int {
	b[0] = h.Rsv<<4 | byte(h.OpCode)
	if h.Fin {
		b[0] |= 0x80
	}
	n := 2
	switch {
	case h.Length < 126:
		b[1] = byte(h.Length)
	case h.Length <= 0xFFFF:
		b[1] = 126
		binary.BigEndian.PutUint16(b[2:], uint16(h.Length))
		n = 4
	default:
		b[1] = 127
		binary.BigEndian.PutUint64(b[2:], uint64(h.Length))
		n = 10
	}
	if h.Masked {
		b[1] |= 0x80
		copy(b[n:], h.Mask[:])
		n += 4
	}
	return n
}

// sendClose sends a close frame with code (best effort).
func (w *wsConn) sendClose(code ws.StatusCode) {
	_ = w.writeFrame(ws.OpClose, true, 0, ws.NewCloseFrameBody(code, ""), false)
}

// readMessage returns the next data message. WebSocket pings are answered,
// pongs recorded; a close (or the end of the connection) returns errEnded
// with closeCode or endErr set. Frames that break RFC 6455 or WSMUX/1's
// WebSocket rules return a *violation.
func (w *wsConn) readMessage(maxMessage int) (op ws.OpCode, msg []byte, err error) {
	if w.closed {
		return 0, nil, errEnded
	}
	started := false
	for {
		h, err := ws.ReadHeader(w.r)
		if err != nil {
			return 0, nil, w.end(err)
		}
		if h.Masked == w.client {
			if w.client {
				return 0, nil, &violation{"2.4", "the server sent a masked frame"}
			}
			return 0, nil, &violation{"2.4", "the client sent an unmasked frame"}
		}
		if h.Rsv != 0 {
			return 0, nil, &violation{"2.4", "the peer set RSV bits"}
		}
		if h.OpCode.IsControl() {
			if h.Length > 125 || !h.Fin {
				return 0, nil, &violation{"2.4", "oversized or fragmented WebSocket control frame"}
			}
			p := make([]byte, h.Length)
			if _, err := io.ReadFull(w.r, p); err != nil {
				return 0, nil, w.end(err)
			}
			if h.Masked {
				ws.Cipher(p, h.Mask, 0)
			}
			switch h.OpCode {
			case ws.OpPing:
				if err := w.writeFrame(ws.OpPong, true, 0, p, false); err != nil {
					return 0, nil, w.end(err)
				}
			case ws.OpPong:
				w.pongs = append(w.pongs, p)
				if !started {
					return ws.OpPong, nil, nil // let the caller look at it
				}
			case ws.OpClose:
				w.closeCode = int(ws.StatusNoStatusRcvd)
				if len(p) >= 2 {
					w.closeCode = int(binary.BigEndian.Uint16(p))
				}
				w.sendClose(ws.StatusNormalClosure)
				w.closed = true
				_ = w.c.Close()
				return 0, nil, errEnded
			default:
				return 0, nil, &violation{"2.4", fmt.Sprintf("reserved WebSocket opcode %d", h.OpCode)}
			}
			continue
		}
		switch {
		case h.OpCode == ws.OpContinuation && !started:
			return 0, nil, &violation{"2.4", "continuation frame without a message"}
		case h.OpCode != ws.OpContinuation && started:
			return 0, nil, &violation{"2.4", "new message inside a fragmented one"}
		case h.OpCode == ws.OpText:
			return 0, nil, &violation{"2.3", "the peer sent a text message"}
		case h.OpCode != ws.OpBinary && h.OpCode != ws.OpContinuation:
			return 0, nil, &violation{"2.4", fmt.Sprintf("reserved WebSocket opcode %d", h.OpCode)}
		}
		if !started {
			op = h.OpCode
		}
		started = true
		if int64(len(msg))+h.Length > int64(maxMessage) {
			return 0, nil, &violation{"2.3", fmt.Sprintf("message over the MAX_MESSAGE_SIZE we announced (%d)", maxMessage)}
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(w.r, p); err != nil {
			return 0, nil, w.end(err)
		}
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		msg = append(msg, p...)
		if h.Fin {
			return op, msg, nil
		}
	}
}

func (w *wsConn) end(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err // the caller's deadline: the connection is still up
	}
	w.closed = true
	w.endErr = err
	_ = w.c.Close()
	return errEnded
}
