// Package program reads the operands of a fuzz program: bytes and big-endian
// 16- and 32-bit words, zeros past the end of the input, so that every input
// is a whole program. The session harnesses (package fuzz) and the flow
// harness (fuzz/flowfuzz) read their programs with it. It imports nothing,
// so flow's tests, which run the flow harness, still build without mux.
package program

// Reader reads operands from a program; past its end it yields zeros.
type Reader struct{ b []byte }

// New returns a Reader of b.
func New(b []byte) *Reader { return &Reader{b: b} }

// More reports whether bytes are left.
func (r *Reader) More() bool { return len(r.b) > 0 }

// U8 reads a byte.
func (r *Reader) U8() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// U16 reads a big-endian 16-bit word.
func (r *Reader) U16() uint16 { return uint16(r.U8())<<8 | uint16(r.U8()) }

// U32 reads a big-endian 32-bit word.
func (r *Reader) U32() uint32 { return uint32(r.U16())<<16 | uint32(r.U16()) }

// Bytes reads n bytes, or what is left when fewer are.
func (r *Reader) Bytes(n int) []byte {
	n = min(n, len(r.b))
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}
