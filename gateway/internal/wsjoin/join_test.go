package wsjoin

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/gobwas/ws"
)

// frameBytes encodes frames as a client sends them (masked).
func frameBytes(t *testing.T, frames ...ws.Frame) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, f := range frames {
		f.Payload = bytes.Clone(f.Payload)
		if err := ws.WriteFrame(&b, ws.MaskFrameInPlace(f)); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func TestJoinConn(t *testing.T) {
	bin := func(fin bool, p string) ws.Frame { return ws.NewFrame(ws.OpBinary, fin, []byte(p)) }
	cont := func(fin bool, p string) ws.Frame { return ws.NewFrame(ws.OpContinuation, fin, []byte(p)) }
	ping := ws.NewPingFrame([]byte("p"))
	var overLimit bytes.Buffer // a continuation that would take the message past MaxMessage
	ws.WriteHeader(&overLimit, ws.Header{OpCode: ws.OpContinuation, Length: MaxMessage, Masked: true})
	for _, tc := range []struct {
		name string
		in   []byte
		want []ws.Frame
		err  error // nil: a clean end after want
	}{
		{"whole messages pass", frameBytes(t, bin(true, "ab"), ping, bin(true, "")), []ws.Frame{bin(true, "ab"), ping, bin(true, "")}, nil},
		{"fragments joined", frameBytes(t, bin(false, "ab"), ping, cont(false, ""), cont(false, "cd"), cont(true, "e"), bin(true, "f")),
			[]ws.Frame{ping, bin(true, "abcde"), bin(true, "f")}, nil},
		{"text fragments keep their opcode", frameBytes(t, ws.NewFrame(ws.OpText, false, []byte("x")), cont(true, "y")),
			[]ws.Frame{ws.NewFrame(ws.OpText, true, []byte("xy"))}, nil},
		{"continuation alone", frameBytes(t, bin(true, "a"), cont(true, "b")), []ws.Frame{bin(true, "a")}, &Error{}},
		{"new message among fragments", frameBytes(t, bin(false, "a"), bin(true, "b")), nil, &Error{}},
		{"over the limit", append(frameBytes(t, bin(false, "a")), overLimit.Bytes()...), nil, &Error{}},
		{"cut inside fragments", frameBytes(t, bin(false, "ab")), nil, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := io.ReadAll(NewConn(nil, bufio.NewReader(bytes.NewReader(tc.in))))
			var je *Error
			if _, isJoin := tc.err.(*Error); isJoin && !errors.As(err, &je) || !isJoin && !errors.Is(err, tc.err) {
				t.Errorf("error %v, want %T %v", err, tc.err, tc.err)
			}
			fs, _ := decode(out)
			if len(fs) != len(tc.want) {
				t.Fatalf("%d frames, want %d", len(fs), len(tc.want))
			}
			for i, f := range fs {
				w := tc.want[i]
				if f.op != w.Header.OpCode || f.fin != w.Header.Fin || !bytes.Equal(f.payload, w.Payload) {
					t.Errorf("frame %d: %v fin=%v %q, want %v fin=%v %q", i, f.op, f.fin, f.payload, w.Header.OpCode, w.Header.Fin, w.Payload)
				}
			}
		})
	}
}
