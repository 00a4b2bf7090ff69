package wsjoin

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/gobwas/ws"
)

// frame is a decoded frame with its payload unmasked.
type frame struct {
	op      ws.OpCode
	fin     bool
	payload []byte
}

// decode reads the complete frames at the start of b (unmasked), and the
// header of a truncated frame after them if there is one. It never trusts
// a length beyond the bytes present.
func decode(b []byte) (fs []frame, partial *ws.Header) {
	for len(b) > 0 {
		r := bytes.NewReader(b)
		h, err := ws.ReadHeader(r)
		if err != nil {
			return fs, nil
		}
		if h.Length > int64(r.Len()) {
			return fs, &h
		}
		hs := len(b) - r.Len()
		p := bytes.Clone(b[hs : hs+int(h.Length)])
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		fs = append(fs, frame{h.OpCode, h.Fin, p})
		b = b[hs+int(h.Length):]
	}
	return fs, nil
}

// model is what Conn must hand out for the frames of in, whole-frame at a
// time: control and unfragmented frames as they are, fragments joined;
// bad reports that in breaks the fragment rules (Conn returns *Error),
// which a truncated last frame's header alone can do.
func model(in []frame, partial *ws.Header) (out []frame, bad bool) {
	var joining *frame
	for _, f := range in {
		switch {
		case f.op.IsControl(), joining == nil && f.fin && f.op != ws.OpContinuation:
			out = append(out, f)
		case joining == nil && f.op == ws.OpContinuation, joining != nil && f.op != ws.OpContinuation:
			return out, true
		default:
			if joining == nil {
				joining = &frame{op: f.op, fin: true}
			}
			if len(joining.payload)+len(f.payload) > MaxMessage {
				return out, true
			}
			joining.payload = append(joining.payload, f.payload...)
			if f.fin {
				out = append(out, *joining)
				joining = nil
			}
		}
	}
	if h := partial; h != nil && !h.OpCode.IsControl() && (joining != nil || !h.Fin || h.OpCode == ws.OpContinuation) {
		// Its payload never arrives, but its header is judged.
		switch {
		case (joining == nil) == (h.OpCode == ws.OpContinuation):
			return out, true
		case joining != nil && h.Length > int64(MaxMessage-len(joining.payload)), joining == nil && h.Length > MaxMessage:
			return out, true
		}
	}
	return out, false
}

// FuzzJoin feeds arbitrary client bytes through a Conn: it must not panic,
// must hand out exactly the model's frames (no fragment left, payloads
// intact, control frames in place), and must fail with *Error exactly when
// the frames break the fragment rules.
func FuzzJoin(f *testing.F) {
	var seed bytes.Buffer
	for _, fr := range []ws.Frame{
		ws.NewFrame(ws.OpBinary, false, []byte("ab")), ws.NewPingFrame([]byte("p")),
		ws.NewFrame(ws.OpContinuation, true, []byte("cd")), ws.NewFrame(ws.OpBinary, true, []byte("e")),
	} {
		ws.WriteFrame(&seed, ws.MaskFrameInPlace(fr))
	}
	f.Add(seed.Bytes())
	f.Add([]byte{0x02, 0x81, 1, 2, 3, 4, 'x', 0x80, 0x81, 1, 2, 3, 4, 'y'}) // fragments of a binary message
	f.Add([]byte{0x80, 0x01, 'z'})                                          // a continuation alone
	f.Fuzz(func(t *testing.T, in []byte) {
		c := NewConn(nil, bufio.NewReader(bytes.NewReader(in)))
		out, err := io.ReadAll(c)
		var je *Error
		isJoin := errors.As(err, &je)
		if err != nil && !isJoin && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ws.ErrHeaderLengthMSB) && !errors.Is(err, ws.ErrHeaderLengthUnexpected) {
			t.Fatalf("unexpected error %v", err)
		}
		got, _ := decode(out)
		want, bad := model(decode(in))
		if bad != isJoin {
			t.Fatalf("error %v, model says broken: %v", err, bad)
		}
		if len(got) != len(want) {
			t.Fatalf("%d frames handed out, want %d", len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.op != w.op || g.fin != w.fin || !bytes.Equal(g.payload, w.payload) {
				t.Fatalf("frame %d: %v fin=%v %d bytes, want %v fin=%v %d bytes", i, g.op, g.fin, len(g.payload), w.op, w.fin, len(w.payload))
			}
		}
	})
}
