package flowfuzz

import "github.com/wsmux/wsmux/flow"

// A flow program's operands: flowInput reads bytes, sizes and windows from
// the fuzz input, and zeros past its end.

// flowInput reads operands from the program; past the end it yields zeros.
type flowInput struct{ b []byte }

func (in *flowInput) more() bool { return len(in.b) > 0 }

func (in *flowInput) u8() byte {
	if len(in.b) == 0 {
		return 0
	}
	v := in.b[0]
	in.b = in.b[1:]
	return v
}

func (in *flowInput) u16() uint16 { return uint16(in.u8())<<8 | uint16(in.u8()) }

func (in *flowInput) u32() uint32 { return uint32(in.u16())<<16 | uint32(in.u16()) }

// size reads a byte count below 2^31, spread over all magnitudes.
func (in *flowInput) size() int64 {
	v := int64(in.u16())
	return v << (in.u8() & 15)
}

// window reads a window size, favouring the interesting ones.
func (in *flowInput) window() uint32 {
	switch in.u8() % 8 {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return 4
	case 3:
		return 1000
	case 4:
		return 256 << 10
	case 5:
		return 16 << 20
	case 6:
		return flow.MaxWindow
	default:
		return in.u32()
	}
}
