package fuzz

import "encoding/binary"

// The bytes the harnesses' streams carry: a pattern of (stream, offset), so
// that a reader can check every byte it gets.

// pattern returns n bytes that depend on (stream, offset): what a writer of
// stream id sends from offset on, so a reader can check order and content.
func pattern(id uint32, off int64, n int) []byte {
	b := make([]byte, n)
	fillPattern(b, id, off)
	return b
}

func fillPattern(b []byte, id uint32, off int64) {
	for i := range b {
		o := uint64(off) + uint64(i)
		x := uint64(id)*0x9E3779B97F4A7C15 ^ (o/8)*0xBF58476D1CE4E5B9
		x ^= x >> 31
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x*0x94D049BB133111EB)
		b[i] = w[o%8]
	}
}
