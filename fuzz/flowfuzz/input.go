package flowfuzz

import (
	"github.com/wsmux/wsmux/flow"
	"github.com/wsmux/wsmux/fuzz/internal/program"
)

// A flow program's operands: the bytes and words of program.Reader, and the
// sizes and windows flowInput adds.

// flowInput reads operands from the program; past the end it yields zeros.
type flowInput struct{ *program.Reader }

// size reads a byte count below 2^31, spread over all magnitudes.
func (in *flowInput) size() int64 {
	v := int64(in.U16())
	return v << (in.U8() & 15)
}

// window reads a window size, favouring the interesting ones.
func (in *flowInput) window() uint32 {
	switch in.U8() % 8 {
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
		return in.U32()
	}
}
