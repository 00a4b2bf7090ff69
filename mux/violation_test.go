package mux

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"
	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

func appendOK(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func synFrame(dst []byte, id uint32) []byte {
	return appendOK(frame.AppendHeadersBlock(dst, id, frame.FlagSYN, nil))
}

func dataFrames(dst []byte, id uint32, n int) []byte {
	chunk := make([]byte, frame.DefaultMaxDataPayload)
	for n > 0 {
		k := min(n, len(chunk))
		dst = appendOK(frame.AppendData(dst, id, false, chunk[:k]))
		n -= k
	}
	return dst
}

// rawFrame appends a frame exactly as given, unchecked: a hostile peer's
// frame the codec would refuse to encode.
func rawFrame(dst []byte, h frame.Header, payload []byte) []byte {
	h.Length = uint16(len(payload))
	return append(frame.AppendHeader(dst, h), payload...)
}

// field appends one header block field: name-len u8 | name | value-len u16 | value.
func field(dst []byte, name string, value []byte) []byte {
	dst = append(dst, byte(len(name)))
	dst = append(dst, name...)
	dst = append(dst, byte(len(value)>>8), byte(len(value)))
	return append(dst, value...)
}

func repeatFrames(n int, f func(dst []byte) []byte) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = f(b)
	}
	return b
}

// TestPeerViolations is the hostile-peer table (docs/spec/wsmux-v1.md section 11):
// each row is a raw peer that speaks bytes, not the mux, and breaks one
// rule. Every row ends the session with the documented code in Err (local),
// a GOAWAY with that code is the last frame on the wire, the WebSocket
// close follows, and no goroutine is left. Threats that need time, a peer
// that does not read, or work accounting have their own tests in
// hostile_test.go.
func TestPeerViolations(t *testing.T) {
	var empty frame.Settings
	settings := frame.AppendSettings(nil, &empty)
	msgs := func(m ...[]byte) func() [][]byte { return func() [][]byte { return m } }
	tests := []struct {
		threat string // what the row defends against (reference)
		name   string
		cfg    *Config
		frames func() [][]byte // messages after our SETTINGS
		first  []byte          // replaces the SETTINGS message
		silent bool            // send nothing at all
		code   frame.ErrorCode
	}{
		// SETTINGS flood (CVE-2019-9515) and preface slowloris.
		{threat: "SETTINGS flood (CVE-2019-9515)", name: "first frame not SETTINGS", first: frame.AppendPing(nil, false, 1), code: frame.ProtocolError},
		{threat: "SETTINGS flood (CVE-2019-9515)", name: "second SETTINGS", frames: msgs(settings), code: frame.ProtocolError},
		{threat: "preface slowloris", name: "SETTINGS never sent", cfg: &Config{SettingsTimeout: 200 * time.Millisecond}, silent: true, code: frame.SettingsTimeout},

		// Frame size.
		{threat: "frame size", name: "DATA over MaxFramePayload", frames: func() [][]byte {
			return [][]byte{appendOK(frame.AppendData(synFrame(nil, 2), 2, false, make([]byte, defaultMaxFramePayload+1)))}
		}, code: frame.FrameSizeError},
		{threat: "frame size", name: "DATA over a small MaxFramePayload", cfg: &Config{MaxFramePayload: 4096}, frames: func() [][]byte {
			return [][]byte{appendOK(frame.AppendData(synFrame(nil, 2), 2, false, make([]byte, 4097)))}
		}, code: frame.FrameSizeError},
		{threat: "frame size", name: "PING with a payload", frames: msgs(rawFrame(nil, frame.Header{Type: frame.TypePing}, []byte{1, 2, 3, 4})), code: frame.FrameSizeError},
		{threat: "frame size", name: "RST_STREAM reason over 128 bytes", frames: func() [][]byte {
			return [][]byte{rawFrame(synFrame(nil, 2), frame.Header{Type: frame.TypeRSTStream, StreamID: 2, Arg: uint32(frame.Cancel)}, bytes.Repeat([]byte{'r'}, 129))}
		}, code: frame.FrameSizeError},
		{threat: "frame size", name: "truncated frame", frames: msgs(frame.AppendPing(nil, false, 1)[:7]), code: frame.FrameSizeError},
		{threat: "frame size", name: "Length past the end of the message", frames: msgs(frame.AppendHeader(nil, frame.Header{Type: frame.TypeData, StreamID: 2, Length: 100})), code: frame.FrameSizeError},

		// Unknown types and flags.
		{threat: "unknown frame type", name: "type 0x42", frames: msgs(frame.AppendHeader(nil, frame.Header{Type: 0x42})), code: frame.ProtocolError},
		{threat: "unknown frame type", name: "type 0x09 (BLOCKED, not in v1)", frames: msgs(frame.AppendHeader(nil, frame.Header{Type: 0x09})), code: frame.ProtocolError},
		{threat: "unknown frame type", name: "type 0xF0 (extension range, not negotiated)", frames: msgs(frame.AppendHeader(nil, frame.Header{Type: 0xF0})), code: frame.ProtocolError},
		{threat: "unknown frame type", name: "unknown flag bit", frames: msgs(frame.AppendHeader(nil, frame.Header{Type: frame.TypePing, Flags: 0x80})), code: frame.ProtocolError},

		// Stream id abuse.
		{threat: "stream id abuse", name: "SYN with our parity", frames: msgs(synFrame(nil, 1)), code: frame.ProtocolError},
		{threat: "stream id abuse", name: "stream id reused", frames: msgs(synFrame(synFrame(nil, 2), 2)), code: frame.ProtocolError},
		{threat: "stream id abuse", name: "stream id going backwards", frames: msgs(synFrame(synFrame(nil, 4), 2)), code: frame.ProtocolError},
		{threat: "stream id abuse", name: "reserved bit 31 set", frames: msgs(rawFrame(nil, frame.Header{Type: frame.TypeHeaders, Flags: frame.FlagSYN, StreamID: 1<<31 | 2}, nil)), code: frame.ProtocolError},
		{threat: "stream id abuse", name: "SYN on stream 0", frames: msgs(rawFrame(nil, frame.Header{Type: frame.TypeHeaders, Flags: frame.FlagSYN}, nil)), code: frame.ProtocolError},
		{threat: "stream id abuse", name: "DATA on an idle stream", frames: msgs(dataFrames(nil, 2, 10)), code: frame.ProtocolError},
		{threat: "stream id abuse", name: "WINDOW_UPDATE on an idle stream", frames: msgs(appendOK(frame.AppendWindowUpdate(nil, 8, 1))), code: frame.ProtocolError},
		{threat: "stream id abuse", name: "RST_STREAM on an idle stream", frames: msgs(appendOK(frame.AppendRSTStream(nil, 8, frame.Cancel, ""))), code: frame.ProtocolError},

		// Stream credit (rapid-reset defence, CVE-2023-44487).
		{threat: "stream credit (CVE-2023-44487)", name: "more opens than the credit", cfg: &Config{MaxStreams: 1}, frames: msgs(synFrame(synFrame(nil, 2), 4)), code: frame.StreamLimit},
		{threat: "stream credit (CVE-2023-44487)", name: "open far beyond the credit", frames: msgs(synFrame(nil, 2*defaultMaxStreams+2)), code: frame.StreamLimit},

		// Flow control.
		{threat: "flow control", name: "DATA past the stream window", frames: func() [][]byte {
			return [][]byte{dataFrames(synFrame(nil, 2), 2, defaultInitialStreamWindow+1)}
		}, code: frame.FlowControlError},
		{threat: "flow control", name: "DATA past the session window", cfg: &Config{InitialStreamWindow: 1 << 20, InitialSessionWindow: 1 << 20}, frames: func() [][]byte {
			b := dataFrames(synFrame(nil, 2), 2, 512<<10)
			return [][]byte{b, dataFrames(synFrame(nil, 4), 4, 512<<10+1)}
		}, code: frame.FlowControlError},
		{threat: "flow control", name: "session WINDOW_UPDATE overflow", frames: msgs(appendOK(frame.AppendWindowUpdate(nil, 0, frame.MaxDelta))), code: frame.FlowControlError},
		{threat: "flow control", name: "stream WINDOW_UPDATE overflow", frames: func() [][]byte {
			return [][]byte{appendOK(frame.AppendWindowUpdate(synFrame(nil, 2), 2, frame.MaxDelta))}
		}, code: frame.FlowControlError},
		{threat: "flow control", name: "WINDOW_UPDATE delta over 2^31-1", frames: msgs(rawFrame(nil, frame.Header{Type: frame.TypeWindowUpdate, Arg: 1 << 31}, nil)), code: frame.FlowControlError},
		{threat: "flow control", name: "WINDOW_UPDATE delta 0", frames: msgs(rawFrame(nil, frame.Header{Type: frame.TypeWindowUpdate}, nil)), code: frame.ProtocolError},

		// Header block bombs (CVE-2023-45288 class; spdystream CVE-2026-35469).
		{threat: "header bomb (CVE-2023-45288)", name: "block over MaxHeaderBytes", cfg: &Config{MaxHeaderBytes: 1024}, frames: func() [][]byte {
			block := field(nil, "a", bytes.Repeat([]byte{'v'}, 2000))
			return [][]byte{appendOK(frame.AppendHeadersBlock(nil, 2, frame.FlagSYN, block))}
		}, code: frame.HeaderTooLarge},
		{threat: "header bomb (CVE-2023-45288)", name: "65 fields", frames: func() [][]byte {
			var block []byte
			for i := 0; i < 65; i++ {
				block = field(block, "x", []byte("1"))
			}
			return [][]byte{appendOK(frame.AppendHeadersBlock(nil, 2, frame.FlagSYN, block))}
		}, code: frame.HeaderTooLarge},
		{threat: "header bomb (CVE-2023-45288)", name: "value over 4 KiB", frames: func() [][]byte {
			block := field(nil, "x", bytes.Repeat([]byte{'v'}, 4<<10+1))
			return [][]byte{appendOK(frame.AppendHeadersBlock(nil, 2, frame.FlagSYN, block))}
		}, code: frame.HeaderTooLarge},
		{threat: "header bomb (CVE-2023-45288)", name: "name over 64 bytes", frames: func() [][]byte {
			block := field(nil, strings.Repeat("n", 65), []byte("v"))
			return [][]byte{appendOK(frame.AppendHeadersBlock(nil, 2, frame.FlagSYN, block))}
		}, code: frame.HeaderTooLarge},
		{threat: "header bomb (CVE-2023-45288)", name: "declared value length past the block", frames: func() [][]byte {
			block := []byte{1, 'x', 0xFF, 0xFF, 'v'}
			return [][]byte{appendOK(frame.AppendHeadersBlock(nil, 2, frame.FlagSYN, block))}
		}, code: frame.HeaderTooLarge},

		// Ping flood (CVE-2019-9512): the token bucket.
		{threat: "ping flood (CVE-2019-9512)", name: "100 PINGs at once", frames: func() [][]byte {
			i := uint32(0)
			return [][]byte{repeatFrames(100, func(b []byte) []byte { i++; return frame.AppendPing(b, false, i) })}
		}, code: frame.EnhanceYourCalm},

		// Useless frames: empty-frame flood (CVE-2019-9518), reset flood
		// (CVE-2019-9514). Stream 4 is refused (AcceptBacklog 1), so it
		// is a closed stream afterwards.
		{threat: "empty frame flood (CVE-2019-9518)", name: "empty DATA without FIN", frames: func() [][]byte {
			return [][]byte{rawFrame(synFrame(nil, 2), frame.Header{Type: frame.TypeData, StreamID: 2}, nil)}
		}, code: frame.ProtocolError},
		{threat: "empty frame flood (CVE-2019-9518)", name: "WINDOW_UPDATE flood on a closed stream", cfg: &Config{AcceptBacklog: 1}, frames: func() [][]byte {
			return [][]byte{synFrame(synFrame(nil, 2), 4), repeatFrames(maxUseless+1, func(b []byte) []byte { return appendOK(frame.AppendWindowUpdate(b, 4, 1)) })}
		}, code: frame.EnhanceYourCalm},
		{threat: "reset flood (CVE-2019-9514)", name: "RST_STREAM flood on a closed stream", cfg: &Config{AcceptBacklog: 1}, frames: func() [][]byte {
			return [][]byte{synFrame(synFrame(nil, 2), 4), repeatFrames(maxUseless+1, func(b []byte) []byte { return appendOK(frame.AppendRSTStream(b, 4, frame.Cancel, "")) })}
		}, code: frame.EnhanceYourCalm},
		{threat: "empty frame flood (CVE-2019-9518)", name: "unsolicited PING ACK flood", frames: func() [][]byte {
			return [][]byte{repeatFrames(maxUseless+1, func(b []byte) []byte { return frame.AppendPing(b, true, 7) })}
		}, code: frame.EnhanceYourCalm},
		{threat: "empty frame flood (CVE-2019-9518)", name: "HEADERS metadata flood", frames: func() [][]byte {
			return [][]byte{synFrame(nil, 2), repeatFrames(maxUseless+1, func(b []byte) []byte { return appendOK(frame.AppendHeadersBlock(b, 2, 0, nil)) })}
		}, code: frame.EnhanceYourCalm},

		// Streams the peer makes us refuse or reset.
		// Streams refused for a full backlog give their slots back only
		// as the application takes streams: opening on regardless goes
		// past the credit.
		{threat: "accept backlog abuse (yamux backlog)", name: "opens nobody accepts", cfg: &Config{AcceptBacklog: 1, MaxStreams: 10}, frames: func() [][]byte {
			id := uint32(0)
			return [][]byte{repeatFrames(11, func(b []byte) []byte { id += 2; return synFrame(b, id) })}
		}, code: frame.StreamLimit},
		{threat: "MadeYouReset (CVE-2025-8671)", name: "DATA after FIN provokes our resets", cfg: &Config{AcceptBacklog: 1000, MaxStreams: 1000}, frames: func() [][]byte {
			id := uint32(0)
			return [][]byte{repeatFrames(maxYoungResets+1, func(b []byte) []byte {
				id += 2
				b = appendOK(frame.AppendHeadersBlock(b, id, frame.FlagSYN|frame.FlagFIN, nil))
				return appendOK(frame.AppendData(b, id, false, []byte{1}))
			})}
		}, code: frame.EnhanceYourCalm},
	}
	for _, transport := range []string{"pipe", "tcp-leader", "tcp-eventloop"} {
		for _, tt := range tests {
			t.Run(transport+"/"+tt.threat+"/"+tt.name, func(t *testing.T) {
				peerViolation(t, transport, tt.cfg, tt.first, settings, tt.silent, tt.frames, tt.code)
			})
		}
	}
}

// peerViolation runs one row of TestPeerViolations. Over "pipe" the
// session's reader goroutine meets the violation; over "tcp-leader" a Read
// of the session's own stream is leading (driver_fastpaths_lead.go) when the peer sends it;
// over "tcp-eventloop" the event loop's parser and workers meet it.
func peerViolation(t *testing.T, transport string, cfg *Config, first, settings []byte, silent bool, frames func() [][]byte, code frame.ErrorCode) {
	defer leakcheck.VerifyNone(t, leakcheck.IgnoreCurrent())
	var a, b net.Conn
	if transport == "pipe" {
		a, b = net.Pipe()
	} else {
		a, b = tcpConns(t)
	}
	switch transport {
	case "tcp-leader":
		cfg = fastPaths(cfg) // the row is about a leading Read
	case "tcp-eventloop":
		cfg = evCfg(cfg)
	}
	cs, err := Client(a, cfg)
	require.NoError(t, err)
	defer cs.Close()
	peer := newRawPeer(t, b, false)
	wire := peer.observe(false)
	normal := first == nil
	if first == nil {
		first = settings
	}
	if silent || peer.send(first) != nil || frames == nil {
		requireHostileEnd(t, cs, wire, code)
		return
	}
	readDone := make(chan struct{})
	if transport == "tcp-leader" && normal {
		st, err := cs.OpenEarly(nil)
		require.NoError(t, err)
		go func() {
			defer close(readDone)
			_, _ = st.Read(make([]byte, 1))
		}()
		awaitLead(t, cs, st, func() { require.NoError(t, peer.send(frame.AppendPing(nil, false, 1))) })
	} else {
		close(readDone)
	}
	go func() {
		for _, m := range frames() {
			if peer.send(m) != nil {
				return
			}
		}
	}()
	requireHostileEnd(t, cs, wire, code)
	<-readDone
}
