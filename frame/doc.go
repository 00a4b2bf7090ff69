// Package frame is the WSMUX/1 wire codec: the 12-byte frame header, every
// frame type, header blocks and the walk over the frames of one WebSocket
// message.
//
// WSMUX/1 is specified in docs/spec/wsmux-v1.md of this repository
// (https://github.com/wsmux/wsmux/blob/main/docs/spec/wsmux-v1.md); this
// package implements its sections 3 (frame layout), 4 (frame types) and 5
// (header blocks) and the entry checks of section 6 (SETTINGS), and is tested
// against the language-neutral vectors of testdata/vectors.
//
// Encode by appending to a caller buffer and decode in place:
//
//	buf, err := frame.AppendData(buf[:0], 1, false, payload)
//	...
//	var it frame.Iterator
//	it.Reset(message, frame.DefaultLimits())
//	for it.Next() {
//		f := it.Frame() // f.Payload aliases message: copy it if you keep it
//	}
//	if err := it.Err(); err != nil {
//		var fe *frame.Error // carries the ErrorCode the session must end with
//	}
//
// Decoding validates everything a frame can get wrong on its own (type,
// flags, reserved bits, stream id rules, lengths, header block syntax and
// limits, SETTINGS values) and returns an *Error whose Code is the protocol
// error to send. Rules that need session state (stream id order, windows,
// credit) belong to package mux.
//
// Nothing here allocates: Append functions write into the caller's slice
// (growing it only when it is too small), and Parse returns sub-slices of
// its input. Decoding a header block into an http.Header is the one
// exception; see DecodeHeaderBlock for its floor.
//
// This package imports nothing of this module and does no I/O: it knows no
// sockets, no goroutines and no WebSocket framing.
package frame
