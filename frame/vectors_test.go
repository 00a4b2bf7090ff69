package frame_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/wsmux/wsmux/frame"
)

// The language-neutral vectors of testdata/vectors (README.md there gives
// the format): every implementation of WSMUX/1 must decode the valid ones
// to the same fields and reject the invalid ones with the same code.

type vecLimits struct {
	MaxDataPayload int `json:"max_data_payload"`
	MaxHeaderBytes int `json:"max_header_bytes"`
	MaxFields      int `json:"max_fields"`
	MaxName        int `json:"max_name"`
	MaxValue       int `json:"max_value"`
}

func (l vecLimits) frame() frame.Limits {
	return frame.Limits{MaxDataPayload: l.MaxDataPayload, Block: l.block()}
}

func (l vecLimits) block() frame.BlockLimits {
	return frame.BlockLimits{MaxBytes: l.MaxHeaderBytes, MaxFields: l.MaxFields, MaxName: l.MaxName, MaxValue: l.MaxValue}
}

type vecFrame struct {
	Name       string      `json:"name"`
	Hex        string      `json:"hex"`
	Type       string      `json:"type"`
	Flags      []string    `json:"flags"`
	StreamID   uint32      `json:"stream_id"`
	Arg        uint32      `json:"arg"`
	Length     int         `json:"length"`
	PayloadHex string      `json:"payload_hex"`
	Headers    [][2]string `json:"headers"`
	Settings   [][2]uint32 `json:"settings"`
}

type vecError struct {
	Name   string `json:"name"`
	Hex    string `json:"hex"`
	Error  string `json:"error"`
	Code   uint32 `json:"code"`
	Rule   string `json:"rule"`
	Frames int    `json:"frames"` // messages: frames decoded before the end or the error
}

type frameVectors struct {
	Version     int        `json:"version"`
	Description string     `json:"description"`
	Limits      vecLimits  `json:"limits"`
	Valid       []vecFrame `json:"valid"`
	Invalid     []vecError `json:"invalid"`
	Messages    []vecError `json:"messages"`
}

type vecBlock struct {
	Name      string              `json:"name"`
	Hex       string              `json:"hex"`
	Fields    [][2]string         `json:"fields"`
	Canonical map[string][]string `json:"canonical"`
}

type headerVectors struct {
	Version     int        `json:"version"`
	Description string     `json:"description"`
	Limits      vecLimits  `json:"limits"`
	Valid       []vecBlock `json:"valid"`
	Invalid     []vecError `json:"invalid"`
}

func loadVectors(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var flagByName = map[string]frame.Flags{"FIN": frame.FlagFIN, "SYN": frame.FlagSYN, "ACK": frame.FlagACK}

// wantCode checks that err is a *frame.Error with the vector's code.
func wantCode(t *testing.T, err error, v vecError) {
	t.Helper()
	var fe *frame.Error
	if !errors.As(err, &fe) {
		t.Fatalf("%s (%s): err = %v, want %s", v.Name, v.Rule, err, v.Error)
	}
	if uint32(fe.Code) != v.Code || fe.Code.String() != v.Error {
		t.Fatalf("%s (%s): %v, want %s (0x%x)", v.Name, v.Rule, fe, v.Error, v.Code)
	}
}

func TestVectorsValidFrames(t *testing.T) {
	var vs frameVectors
	loadVectors(t, "frames.json", &vs)
	lim := vs.Limits.frame()
	if len(vs.Valid) < 20 {
		t.Fatalf("only %d valid frames", len(vs.Valid))
	}
	for _, v := range vs.Valid {
		t.Run(v.Name, func(t *testing.T) {
			b := unhex(t, v.Hex)
			f, n, err := frame.Parse(b, &lim)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var fl frame.Flags
			for _, s := range v.Flags {
				fl |= flagByName[s]
			}
			if n != len(b) || f.Type.String() != v.Type || f.Flags != fl || f.StreamID != v.StreamID ||
				f.Arg != v.Arg || int(f.Length) != v.Length || hex.EncodeToString(f.Payload) != v.PayloadHex {
				t.Fatalf("decoded %+v (n %d), want %+v", f.Header, n, v)
			}
			if v.Headers != nil {
				var it frame.BlockIterator
				it.Reset(f.Payload, &lim.Block)
				var got [][2]string
				for it.Next() {
					name, value := it.Field()
					got = append(got, [2]string{string(name), string(value)})
				}
				if it.Err() != nil || !slices.Equal(got, v.Headers) && len(got)+len(v.Headers) > 0 {
					t.Fatalf("fields %q (%v), want %q", got, it.Err(), v.Headers)
				}
			}
			if v.Settings != nil {
				var s frame.Settings
				if err := frame.ParseSettings(f.Payload, &s); err != nil {
					t.Fatal(err)
				}
				var got [][2]uint32
				for i := 0; i < s.Len(); i++ {
					got = append(got, [2]uint32{uint32(s.At(i).ID), s.At(i).Value})
				}
				if !slices.Equal(got, v.Settings) && len(got)+len(v.Settings) > 0 {
					t.Fatalf("settings %v, want %v", got, v.Settings)
				}
			}
			// Encoding the decoded fields gives the same bytes back.
			enc, err := encode(f)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(enc, b) {
				t.Fatalf("encoded %x\nwant    %x", enc, b)
			}
		})
	}
}

// encode re-encodes f with the typed encoder of its type.
func encode(f frame.Frame) ([]byte, error) {
	switch f.Type {
	case frame.TypeData:
		return frame.AppendData(nil, f.StreamID, f.Flags.Has(frame.FlagFIN), f.Payload)
	case frame.TypeHeaders:
		return frame.AppendHeadersBlock(nil, f.StreamID, f.Flags, f.Payload)
	case frame.TypeWindowUpdate:
		return frame.AppendWindowUpdate(nil, f.StreamID, f.Arg)
	case frame.TypeRSTStream:
		return frame.AppendRSTStream(nil, f.StreamID, f.Code(), string(f.Payload))
	case frame.TypeStopSending:
		return frame.AppendStopSending(nil, f.StreamID, f.Code())
	case frame.TypePing:
		return frame.AppendPing(nil, f.Flags.Has(frame.FlagACK), f.Arg), nil
	case frame.TypeGoAway:
		return frame.AppendGoAway(nil, f.StreamID, f.Code(), string(f.Payload))
	case frame.TypeSettings:
		var s frame.Settings
		if err := frame.ParseSettings(f.Payload, &s); err != nil {
			return nil, err
		}
		return frame.AppendSettings(nil, &s), nil
	case frame.TypeMaxStreams:
		return frame.AppendMaxStreams(nil, f.Arg)
	}
	return nil, errors.New("no encoder for " + f.Type.String())
}

func TestVectorsInvalidFrames(t *testing.T) {
	var vs frameVectors
	loadVectors(t, "frames.json", &vs)
	lim := vs.Limits.frame()
	if len(vs.Invalid) < 30 {
		t.Fatalf("only %d invalid frames", len(vs.Invalid))
	}
	for _, v := range vs.Invalid {
		t.Run(v.Name, func(t *testing.T) {
			_, _, err := frame.Parse(unhex(t, v.Hex), &lim)
			wantCode(t, err, v)
		})
	}
}

func TestVectorsMessages(t *testing.T) {
	var vs frameVectors
	loadVectors(t, "frames.json", &vs)
	for _, v := range vs.Messages {
		t.Run(v.Name, func(t *testing.T) {
			var it frame.Iterator
			it.Reset(unhex(t, v.Hex), vs.Limits.frame())
			for it.Next() {
			}
			if it.Count() != v.Frames {
				t.Fatalf("%d frames, want %d", it.Count(), v.Frames)
			}
			if v.Error == "" {
				if it.Err() != nil {
					t.Fatal(it.Err())
				}
				return
			}
			wantCode(t, it.Err(), v)
		})
	}
}

func TestVectorsHeaderBlocks(t *testing.T) {
	var vs headerVectors
	loadVectors(t, "headers.json", &vs)
	lim := vs.Limits.block()
	for _, v := range vs.Valid {
		t.Run(v.Name, func(t *testing.T) {
			b := unhex(t, v.Hex)
			var it frame.BlockIterator
			it.Reset(b, &lim)
			var got [][2]string
			for it.Next() {
				name, value := it.Field()
				got = append(got, [2]string{string(name), string(value)})
			}
			if it.Err() != nil || len(got) != len(v.Fields) || len(got) > 0 && !slices.Equal(got, v.Fields) {
				t.Fatalf("fields %q (%v), want %q", got, it.Err(), v.Fields)
			}
			h := http.Header{}
			if err := frame.DecodeHeaderBlock(b, &lim, h); err != nil {
				t.Fatal(err)
			}
			if v.Canonical != nil && !reflect.DeepEqual(map[string][]string(h), v.Canonical) {
				t.Fatalf("decoded %v, want %v", h, v.Canonical)
			}
			// A block whose names are sorted is what the encoder writes.
			if slices.IsSortedFunc(v.Fields, func(a, b [2]string) int {
				switch {
				case a[0] < b[0]:
					return -1
				case a[0] > b[0]:
					return 1
				}
				return 0
			}) {
				enc, err := frame.AppendHeaderBlock(nil, h, &lim)
				if err != nil || !bytes.Equal(enc, b) {
					t.Fatalf("encoded %x (%v)\nwant    %x", enc, err, b)
				}
			}
		})
	}
	for _, v := range vs.Invalid {
		t.Run(v.Name, func(t *testing.T) {
			b := unhex(t, v.Hex)
			wantCode(t, frame.CheckHeaderBlock(b, &lim), v)
			h := http.Header{}
			wantCode(t, frame.DecodeHeaderBlock(b, &lim, h), v)
			if len(h) != 0 {
				t.Fatalf("a rejected block left %v", h)
			}
		})
	}
}
