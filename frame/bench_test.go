package frame_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/wsmux/wsmux/frame"
)

var (
	sinkBytes  []byte
	sinkFrame  frame.Frame
	sinkHeader frame.Header
	sinkErr    error
	sinkInt    int
)

// benchFrame is one frame type's encoder and a wire sample of it.
type benchFrame struct {
	name  string
	bytes int64 // payload bytes per op, for SetBytes (0: none)
	enc   func(dst []byte) ([]byte, error)
}

func benchFrames(b *testing.B) []benchFrame {
	lim := frame.DefaultBlockLimits()
	payload := make([]byte, frame.DefaultMaxDataPayload)
	h := kubeExecHeader()
	var s frame.Settings
	for _, e := range []frame.Setting{
		{ID: frame.SettingMaxDataPayload, Value: 16 << 10}, {ID: frame.SettingMaxHeaderBytes, Value: 8 << 10},
		{ID: frame.SettingInitialStreamWindow, Value: 256 << 10}, {ID: frame.SettingInitialSessionWindow, Value: 1 << 20},
		{ID: frame.SettingInitialMaxStreams, Value: 100}, {ID: frame.SettingMaxMessageSize, Value: 1 << 20},
	} {
		if err := s.Set(e.ID, e.Value); err != nil {
			b.Fatal(err)
		}
	}
	return []benchFrame{
		{"data", int64(len(payload)), func(d []byte) ([]byte, error) { return frame.AppendData(d, 1, false, payload) }},
		{"headers", 0, func(d []byte) ([]byte, error) { return frame.AppendHeaders(d, 1, frame.FlagSYN, h, &lim) }},
		{"window-update", 0, func(d []byte) ([]byte, error) { return frame.AppendWindowUpdate(d, 1, 1<<16) }},
		{"rst-stream", 0, func(d []byte) ([]byte, error) { return frame.AppendRSTStream(d, 1, frame.Cancel, "context canceled") }},
		{"stop-sending", 0, func(d []byte) ([]byte, error) { return frame.AppendStopSending(d, 1, frame.Cancel) }},
		{"ping", 0, func(d []byte) ([]byte, error) { return frame.AppendPing(d, false, 42), nil }},
		{"goaway", 0, func(d []byte) ([]byte, error) { return frame.AppendGoAway(d, 7, frame.NoError, "server shutting down") }},
		{"settings", 0, func(d []byte) ([]byte, error) { return frame.AppendSettings(d, &s), nil }},
		{"max-streams", 0, func(d []byte) ([]byte, error) { return frame.AppendMaxStreams(d, 200) }},
	}
}

func BenchmarkEncode(b *testing.B) {
	buf := make([]byte, 0, 64<<10)
	for _, bf := range benchFrames(b) {
		b.Run(bf.name, func(b *testing.B) {
			if bf.bytes > 0 {
				b.SetBytes(bf.bytes)
			}
			b.ReportAllocs()
			for b.Loop() {
				sinkBytes, sinkErr = bf.enc(buf)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	lim := frame.DefaultLimits()
	for _, bf := range benchFrames(b) {
		wire, err := bf.enc(nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bf.name, func(b *testing.B) {
			if bf.bytes > 0 {
				b.SetBytes(bf.bytes)
			}
			b.ReportAllocs()
			for b.Loop() {
				sinkFrame, sinkInt, sinkErr = frame.Parse(wire, &lim)
			}
		})
		if bf.name == "data" {
			b.Run("data-header", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					sinkHeader, sinkErr = frame.ParseHeader(wire)
				}
			})
		}
	}
}

func BenchmarkMessage(b *testing.B) {
	lim := frame.DefaultLimits()
	chunk := make([]byte, 1<<10)
	for _, n := range []int{1, 16, 64} {
		var msg []byte
		for i := range n {
			var err error
			if msg, err = frame.AppendData(msg, uint32(2*i+1), false, chunk); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("%dframes", n), func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			var it frame.Iterator
			for b.Loop() {
				it.Reset(msg, lim)
				for it.Next() {
					sinkFrame = it.Frame()
				}
				if it.Count() != n || it.Err() != nil {
					b.Fatal(it.Count(), it.Err())
				}
			}
		})
	}
}

func BenchmarkHeaderBlock(b *testing.B) {
	lim := frame.DefaultBlockLimits()
	h := kubeExecHeader()
	buf := make([]byte, 0, 1<<10)
	block, err := frame.AppendHeaderBlock(nil, h, &lim)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(block)))
		b.ReportAllocs()
		for b.Loop() {
			sinkBytes, sinkErr = frame.AppendHeaderBlock(buf, h, &lim)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(block)))
		b.ReportAllocs()
		out := http.Header{}
		for b.Loop() {
			clear(out)
			sinkErr = frame.DecodeHeaderBlock(block, &lim, out)
		}
	})
	b.Run("check", func(b *testing.B) {
		b.SetBytes(int64(len(block)))
		b.ReportAllocs()
		for b.Loop() {
			sinkErr = frame.CheckHeaderBlock(block, &lim)
		}
	})
}
