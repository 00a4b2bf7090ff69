package frame_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/wsmux/wsmux/frame"
)

// resumeVectors is testdata/vectors/resume.json: the frames of the
// resumption extension (docs/spec/wsmux-resume-v1.md).
type resumeVectors struct {
	Version     int `json:"version"`
	Description string
	Limits      struct {
		vecLimits
		Resume bool `json:"resume"`
	} `json:"limits"`
	Valid         []vecFrame `json:"valid"`
	Invalid       []vecError `json:"invalid"`
	NotNegotiated []vecError `json:"not_negotiated"`
}

// TestVectorsResume decodes the valid RECEIVED and FEATURES frames on a
// session that negotiated resumption, rejects the invalid ones with their
// codes, and rejects RECEIVED with PROTOCOL_ERROR where resumption was not
// negotiated (as the unknown-type vector of frames.json says of 0x9).
func TestVectorsResume(t *testing.T) {
	var vs resumeVectors
	loadVectors(t, "resume.json", &vs)
	lim := vs.Limits.frame()
	lim.Resume = vs.Limits.Resume
	if !lim.Resume || len(vs.Valid) == 0 || len(vs.Invalid) == 0 || len(vs.NotNegotiated) == 0 {
		t.Fatalf("resume.json: %d valid, %d invalid, %d not negotiated", len(vs.Valid), len(vs.Invalid), len(vs.NotNegotiated))
	}
	for _, v := range vs.Valid {
		t.Run(v.Name, func(t *testing.T) {
			b := unhex(t, v.Hex)
			f, n, err := frame.Parse(b, &lim)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if n != len(b) || f.Type.String() != v.Type || f.StreamID != v.StreamID || f.Arg != v.Arg ||
				int(f.Length) != v.Length || hex.EncodeToString(f.Payload) != v.PayloadHex || len(v.Flags) != 0 && f.Flags == 0 {
				t.Fatalf("decoded %+v, want %+v", f.Header, v)
			}
			var enc []byte
			if f.Type == frame.TypeReceived {
				enc = frame.AppendReceived(nil, f.Arg)
			} else {
				enc, err = encode(f)
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(enc, b) {
				t.Fatalf("encoded %x\nwant    %x", enc, b)
			}
		})
	}
	for _, v := range vs.Invalid {
		t.Run(v.Name, func(t *testing.T) {
			_, _, err := frame.Parse(unhex(t, v.Hex), &lim)
			wantCode(t, err, v)
		})
	}
	plain := vs.Limits.frame()
	for _, v := range vs.NotNegotiated {
		t.Run(v.Name, func(t *testing.T) {
			_, _, err := frame.Parse(unhex(t, v.Hex), &plain)
			wantCode(t, err, v)
			// A message holding it fails the same way in an iterator.
			var it frame.Iterator
			it.Reset(unhex(t, v.Hex), plain)
			if it.Next() {
				t.Fatal("iterator accepted it")
			}
			wantCode(t, it.Err(), v)
		})
	}
}
