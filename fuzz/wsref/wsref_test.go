package wsref

import (
	"bytes"
	"io"
	"testing"
)

// TestReadRoundTrip: frames AppendFrame writes read back as the same
// messages; the boundary length forms and each way of ending are covered.
func TestReadRoundTrip(t *testing.T) {
	key := [4]byte{9, 8, 7, 6}
	var wire []byte
	var want [][]byte
	for _, n := range []int{0, 1, 125, 126, 127, 0xffff, 0x10000} {
		p := bytes.Repeat([]byte{byte(n)}, n)
		wire = AppendFrame(wire, true, 2, true, key, p)
		want = append(want, p)
	}
	wire = AppendFrame(wire, false, 2, true, key, []byte("ab"))
	wire = AppendFrame(wire, true, 9, true, key, []byte("ping"))
	wire = AppendFrame(wire, true, 0, true, key, []byte("cd"))
	want = append(want, []byte("abcd"))
	r := Read(wire, true, 1<<20)
	if r.End.Err != io.EOF || len(r.Messages) != len(want) || len(r.Pings) != 1 || string(r.Pings[0]) != "ping" {
		t.Fatalf("got %d messages, %d pings, end %+v", len(r.Messages), len(r.Pings), r.End)
	}
	for i := range want {
		if !bytes.Equal(r.Messages[i], want[i]) {
			t.Fatalf("message %d differs", i)
		}
	}
	for _, tt := range []struct {
		name string
		wire []byte
		end  error
		code uint16
	}{
		{"unmasked to a server", AppendFrame(nil, true, 2, false, key, nil), ErrProtocol, 1002},
		{"text", AppendFrame(nil, true, 1, true, key, nil), ErrProtocol, 1003},
		{"too big", AppendFrame(nil, true, 2, true, key, make([]byte, 11)), ErrProtocol, 1009},
		{"close", AppendFrame(nil, true, 8, true, key, []byte{3, 0xe8}), ErrClose, 1000},
		{"truncated", AppendFrame(nil, true, 2, true, key, []byte("abc"))[:7], io.ErrUnexpectedEOF, 0},
	} {
		if r := Read(tt.wire, true, 10); r.End.Err != tt.end || r.End.Code != tt.code {
			t.Errorf("%s: end %+v, want %v %d", tt.name, r.End, tt.end, tt.code)
		}
	}
}
