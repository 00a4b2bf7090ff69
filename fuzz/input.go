package fuzz

// flowInput reads operands from a session program; past the end it yields
// zeros. (flowfuzz has its own, with the window and size operands of the
// flow programs.)
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
