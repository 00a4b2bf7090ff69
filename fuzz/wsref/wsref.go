// Package wsref is an independent reference reader of RFC 6455 WebSocket
// frames, written from the RFC and the documented policy of wsmux's
// message reader (mux/internal/wsio), for differential fuzzing
// (FuzzWebSocketFrame). It shares no code with gobwas/ws or wsio and
// imports only the standard library, so wsio's own tests can import it
// (package fuzz cannot: it imports mux, and Go's internal rule keeps it
// away from mux/internal/wsio).
//
// Policy encoded here (the contract of wsio.Conn.ReadMessage):
//   - binary messages only: a text frame is close 1003;
//   - RSV bits, reserved opcodes, the wrong mask bit for the role, control
//     frames over 125 bytes or not final, a continuation without a start, a
//     new data frame inside a fragmented message, a 64-bit length with the
//     most significant bit set, an invalid close payload: close 1002;
//   - a message longer than maxMessage: close 1009, decided from the
//     declared length before the payload is read;
//   - length encodings need not be minimal (RFC 6455 says "must" for the
//     sender; gobwas/ws, and therefore wsio, accept them: lenient on
//     purpose);
//   - io.EOF only when the stream ends between frames outside a fragmented
//     message, io.ErrUnexpectedEOF anywhere else.
package wsref

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// End says how a stream of frames ended.
type End struct {
	// Err is io.EOF, io.ErrUnexpectedEOF, ErrProtocol or ErrClose.
	Err error
	// Code is the close code to send (ErrProtocol) or the peer's close
	// code (ErrClose, 1005 when its close frame had no payload).
	Code uint16
	// Reason is the peer's close reason (ErrClose).
	Reason string
	// Why describes a protocol error, for messages.
	Why string
}

// The two non-I/O ends.
var (
	ErrProtocol = errors.New("wsref: protocol error")
	ErrClose    = errors.New("wsref: close frame")
)

// Result is what a reader must report for a stream of bytes.
type Result struct {
	Messages [][]byte // complete binary messages, reassembled and unmasked
	Pings    [][]byte // ping payloads in order (unmasked)
	Pongs    int      // pong frames seen
	End      End
}

// Read parses stream as a reader with the given role would: a server
// expects masked frames, a client unmasked ones. maxMessage bounds a
// reassembled message.
func Read(stream []byte, server bool, maxMessage int) Result {
	var r Result
	p := parser{b: stream}
	var msg []byte
	fragmented := false
	for {
		if len(p.b) == 0 {
			if fragmented {
				r.End = End{Err: io.ErrUnexpectedEOF}
			} else {
				r.End = End{Err: io.EOF}
			}
			return r
		}
		h, ok := p.header()
		if !ok {
			r.End = End{Err: io.ErrUnexpectedEOF}
			return r
		}
		if h.msb {
			r.End = protocol(1002, "64-bit length with the most significant bit set")
			return r
		}
		control := h.op&8 != 0
		switch {
		case (h.op >= 3 && h.op <= 7) || h.op >= 11:
			r.End = protocol(1002, fmt.Sprintf("reserved opcode %d", h.op))
			return r
		case control && h.length > 125:
			r.End = protocol(1002, "control frame over 125 bytes")
			return r
		case control && !h.fin:
			r.End = protocol(1002, "fragmented control frame")
			return r
		case h.rsv != 0:
			r.End = protocol(1002, "RSV bits set")
			return r
		case server && !h.masked:
			r.End = protocol(1002, "unmasked frame from a client")
			return r
		case !server && h.masked:
			r.End = protocol(1002, "masked frame from a server")
			return r
		case fragmented && !control && h.op != 0:
			r.End = protocol(1002, "data frame inside a fragmented message")
			return r
		case !fragmented && h.op == 0:
			r.End = protocol(1002, "continuation without a start")
			return r
		}
		if control {
			payload, ok := p.payload(h)
			if !ok {
				r.End = End{Err: io.ErrUnexpectedEOF}
				return r
			}
			switch h.op {
			case 9:
				r.Pings = append(r.Pings, payload)
			case 10:
				r.Pongs++
			case 8:
				r.End = closeEnd(payload)
				return r
			}
			continue
		}
		if h.op == 1 {
			r.End = protocol(1003, "text frame")
			return r
		}
		if h.length > uint64(maxMessage-len(msg)) {
			r.End = protocol(1009, "message too big")
			return r
		}
		payload, ok := p.payload(h)
		if !ok {
			r.End = End{Err: io.ErrUnexpectedEOF}
			return r
		}
		msg = append(msg, payload...)
		if h.fin {
			if msg == nil {
				msg = []byte{}
			}
			r.Messages = append(r.Messages, msg)
			msg = nil
			fragmented = false
		} else {
			fragmented = true
		}
	}
}

func protocol(code uint16, why string) End { return End{Err: ErrProtocol, Code: code, Why: why} }

// closeEnd checks a close payload (RFC 6455 7.1.5, 7.4).
func closeEnd(p []byte) End {
	switch len(p) {
	case 0:
		return End{Err: ErrClose, Code: 1005}
	case 1:
		return protocol(1002, "1-byte close payload")
	}
	code := binary.BigEndian.Uint16(p)
	reason := p[2:]
	valid := false
	switch {
	case code >= 3000 && code <= 4999:
		valid = true
	case code == 1000, code == 1001, code == 1002, code == 1003, code == 1007,
		code == 1008, code == 1009, code == 1010, code == 1011:
		valid = true
	}
	if !valid {
		return protocol(1002, fmt.Sprintf("close code %d", code))
	}
	if !utf8.Valid(reason) {
		return protocol(1002, "close reason not UTF-8")
	}
	return End{Err: ErrClose, Code: code, Reason: string(reason)}
}

type header struct {
	fin, masked, msb bool
	rsv, op          byte
	length           uint64
	mask             [4]byte
}

type parser struct{ b []byte }

func (p *parser) take(n int) ([]byte, bool) {
	if len(p.b) < n {
		p.b = nil
		return nil, false
	}
	v := p.b[:n]
	p.b = p.b[n:]
	return v, true
}

// header decodes one frame header; false when the stream ends inside it.
func (p *parser) header() (h header, ok bool) {
	b, ok := p.take(2)
	if !ok {
		return h, false
	}
	h.fin = b[0]&0x80 != 0
	h.rsv = b[0] >> 4 & 7
	h.op = b[0] & 15
	h.masked = b[1]&0x80 != 0
	h.length = uint64(b[1] & 0x7f)
	switch h.length {
	case 126:
		x, ok := p.take(2)
		if !ok {
			return h, false
		}
		h.length = uint64(x[0])<<8 | uint64(x[1])
	case 127:
		x, ok := p.take(8)
		if !ok {
			return h, false
		}
		for _, c := range x {
			h.length = h.length<<8 | uint64(c)
		}
		h.msb = x[0]&0x80 != 0
	}
	if h.masked {
		x, ok := p.take(4)
		if !ok {
			return h, false
		}
		copy(h.mask[:], x)
	}
	return h, true
}

// payload reads and unmasks a frame's payload into a fresh slice.
func (p *parser) payload(h header) ([]byte, bool) {
	if h.length > uint64(len(p.b)) {
		p.b = nil
		return nil, false
	}
	v := make([]byte, h.length)
	copy(v, p.b)
	p.b = p.b[h.length:]
	if h.masked {
		for i := range v {
			v[i] ^= h.mask[i&3]
		}
	}
	return v, true
}

// AppendFrame appends one frame: fin, opcode op (4 bits), payload masked
// with key when mask is set. The length uses the minimal encoding.
func AppendFrame(dst []byte, fin bool, op byte, mask bool, key [4]byte, payload []byte) []byte {
	b0 := op & 15
	if fin {
		b0 |= 0x80
	}
	var m byte
	if mask {
		m = 0x80
	}
	n := len(payload)
	switch {
	case n < 126:
		dst = append(dst, b0, m|byte(n))
	case n <= 0xffff:
		dst = append(dst, b0, m|126, byte(n>>8), byte(n))
	default:
		dst = append(dst, b0, m|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	if mask {
		dst = append(dst, key[:]...)
	}
	start := len(dst)
	dst = append(dst, payload...)
	if mask {
		for i := range payload {
			dst[start+i] ^= key[i&3]
		}
	}
	return dst
}
