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

// readFrames decodes what a Conn hands out, unmasked, until its error.
func readFrames(jc *Conn) ([]ws.Frame, error) {
	r := bufio.NewReader(jc)
	var fs []ws.Frame
	for {
		f, err := ws.ReadFrame(r)
		if err != nil {
			return fs, err
		}
		if f.Header.Masked {
			ws.Cipher(f.Payload, f.Header.Mask, 0)
		}
		f.Header.Masked, f.Header.Mask = false, [4]byte{}
		fs = append(fs, f)
	}
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
		err  error // nil: io.EOF after want
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
			jc := NewConn(nil, bufio.NewReader(bytes.NewReader(tc.in)))
			fs, err := readFrames(jc)
			want := tc.err
			if want == nil {
				want = io.EOF
			}
			var je *Error
			if _, isJoin := want.(*Error); isJoin && !errors.As(err, &je) || !isJoin && !errors.Is(err, want) {
				t.Errorf("error %v, want %T %v", err, want, want)
			}
			if len(fs) != len(tc.want) {
				t.Fatalf("%d frames, want %d", len(fs), len(tc.want))
			}
			for i, f := range fs {
				w := tc.want[i]
				if f.Header.OpCode != w.Header.OpCode || f.Header.Fin != w.Header.Fin || !bytes.Equal(f.Payload, w.Payload) {
					t.Errorf("frame %d: %v fin=%v %q, want %v fin=%v %q", i, f.Header.OpCode, f.Header.Fin, f.Payload, w.Header.OpCode, w.Header.Fin, w.Payload)
				}
			}
		})
	}
}
