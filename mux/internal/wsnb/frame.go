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
	length := len(buf) - HeaderRoom
	var b [HeaderRoom]byte
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
		mask := ws.NewMask()
		copy(b[n:], mask[:])
		n += 4
		ws.Cipher(buf[HeaderRoom:], mask, 0)
	}
	start := HeaderRoom - n
	copy(buf[start:HeaderRoom], b[:n])
	return start
}
