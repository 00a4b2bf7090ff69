package wsnb

import (
	"encoding/binary"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// HeaderRoom is the room a Frame buffer reserves in front of its payload.
const HeaderRoom = wsio.HeaderRoom

// Frame makes buf[HeaderRoom:] one final frame of op: its header is
// written right-aligned into buf[:HeaderRoom] and, for a client, the
// payload is masked in place with a fresh mask. It returns where the frame
// starts: buf[start:] is what goes on the wire.
func Frame(buf []byte, op ws.OpCode, client bool) int {
	start, mask := header(buf, op, len(buf)-HeaderRoom, client)
	if client {
		ws.Cipher(buf[HeaderRoom:], mask, 0)
	}
	return start
}

// FrameVec makes one final binary frame of buf[HeaderRoom:] with segs
// spliced in (each segment's Data goes on the wire before buf[seg.At:],
// segments in order) and appends its pieces, in wire order, to vec: the
// header is written into buf[:HeaderRoom] and, for a client, every piece
// is masked in place. No payload byte is copied.
func FrameVec(vec [][]byte, buf []byte, segs []wsio.Segment, client bool) [][]byte {
	length := len(buf) - HeaderRoom
	for _, sg := range segs {
		length += len(sg.Data)
	}
	start, mask := header(buf, ws.OpBinary, length, client)
	off := 0
	piece := func(p []byte) {
		if client {
			ws.Cipher(p, mask, off)
			off += len(p)
		}
		if len(p) > 0 {
			vec = append(vec, p)
		}
	}
	prev := HeaderRoom
	vec = append(vec, buf[start:HeaderRoom])
	for _, sg := range segs {
		piece(buf[prev:sg.At])
		piece(sg.Data)
		prev = sg.At
	}
	piece(buf[prev:])
	return vec
}

// header writes the header of a final frame of op carrying length payload
// bytes right-aligned into buf[:HeaderRoom], and returns where it starts
// and, for a client, the fresh mask it announces.
func header(buf []byte, op ws.OpCode, length int, client bool) (int, [4]byte) {
	var b [HeaderRoom]byte
	var mask [4]byte
	b[0] = 0x80 | byte(op)
	n := 2
	switch {
	case length < 126:
		b[1] = byte(length)
	case length <= 0xffff:
		b[1] = 126
		binary.BigEndian.PutUint16(b[2:], uint16(length))
		n += 2
	default:
		b[1] = 127
		binary.BigEndian.PutUint64(b[2:], uint64(length))
		n += 8
	}
	if client {
		b[1] |= 0x80
		mask = ws.NewMask()
		copy(b[n:], mask[:])
		n += 4
	}
	start := HeaderRoom - n
	copy(buf[start:HeaderRoom], b[:n])
	return start, mask
}
