package frame_test

import (
	"bytes"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// hx decodes hex written with optional spaces; tests write wire bytes by hand
// so that they do not depend on the encoder.
func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// cat concatenates byte slices into a new one.
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// rawHeader writes a 12-byte frame header by hand, without package frame.
func rawHeader(typ, flags byte, length uint16, stream, arg uint32) []byte {
	return []byte{
		typ, flags, byte(length >> 8), byte(length),
		byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream),
		byte(arg >> 24), byte(arg >> 16), byte(arg >> 8), byte(arg),
	}
}

// rawFrame is rawHeader with Length set to len(payload), followed by payload.
func rawFrame(typ, flags byte, stream, arg uint32, payload []byte) []byte {
	return cat(rawHeader(typ, flags, uint16(len(payload)), stream, arg), payload)
}

// rawField writes one header block field by hand (name-len u8, name,
// value-len u16, value).
func rawField(name, value string) []byte {
	return cat([]byte{byte(len(name))}, []byte(name), []byte{byte(len(value) >> 8), byte(len(value))}, []byte(value))
}

// rawSetting writes one SETTINGS entry by hand.
func rawSetting(id uint16, v uint32) []byte {
	return []byte{byte(id >> 8), byte(id), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func settingsOf(t testing.TB, kv ...uint32) *frame.Settings {
	t.Helper()
	var s frame.Settings
	for i := 0; i < len(kv); i += 2 {
		require.NoError(t, s.Set(frame.SettingID(kv[i]), kv[i+1]))
	}
	return &s
}

func TestRoundTrip(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	stdoutBlock := rawField("streamtype", "stdout") // 0x13 bytes
	big := bytes.Repeat([]byte{0xa5}, frame.DefaultMaxDataPayload)
	reason128 := strings.Repeat("r", frame.MaxReasonLen)
	debug256 := strings.Repeat("é", frame.MaxDebugLen/2)
	var settings16 frame.Settings
	var payload16 []byte
	for id := uint16(0x100); id < 0x110; id++ {
		require.NoError(t, settings16.Set(frame.SettingID(id), uint32(id)*3))
		payload16 = append(payload16, rawSetting(id, uint32(id)*3)...)
	}
	ok := func(b []byte) ([]byte, error) { return b, nil }

	cases := []struct {
		name    string
		enc     func(dst []byte) ([]byte, error)
		head    string // hex of the 12 header bytes
		payload []byte
		want    frame.Header
	}{
		{"data", func(d []byte) ([]byte, error) { return frame.AppendData(d, 1, false, []byte("hi")) },
			"00 00 0002 00000001 00000000", []byte("hi"),
			frame.Header{Type: frame.TypeData, Length: 2, StreamID: 1}},
		{"data-fin", func(d []byte) ([]byte, error) { return frame.AppendData(d, 3, true, []byte("x")) },
			"00 01 0001 00000003 00000000", []byte("x"),
			frame.Header{Type: frame.TypeData, Flags: frame.FlagFIN, Length: 1, StreamID: 3}},
		{"data-empty-fin", func(d []byte) ([]byte, error) { return frame.AppendData(d, frame.MaxStreamID, true, nil) },
			"00 01 0000 7fffffff 00000000", nil,
			frame.Header{Type: frame.TypeData, Flags: frame.FlagFIN, StreamID: frame.MaxStreamID}},
		{"data-16k", func(d []byte) ([]byte, error) { return frame.AppendData(d, 5, false, big) },
			"00 00 4000 00000005 00000000", big,
			frame.Header{Type: frame.TypeData, Length: 0x4000, StreamID: 5}},
		{"data-header", func(d []byte) ([]byte, error) {
			d, err := frame.AppendDataHeader(d, 5, true, 3)
			return append(d, "abc"...), err
		},
			"00 01 0003 00000005 00000000", []byte("abc"),
			frame.Header{Type: frame.TypeData, Flags: frame.FlagFIN, Length: 3, StreamID: 5}},
		{"headers-syn-block", func(d []byte) ([]byte, error) {
			return frame.AppendHeadersBlock(d, 1, frame.FlagSYN, stdoutBlock)
		},
			"01 02 0013 00000001 00000000", stdoutBlock,
			frame.Header{Type: frame.TypeHeaders, Flags: frame.FlagSYN, Length: 0x13, StreamID: 1}},
		{"headers-ack", func(d []byte) ([]byte, error) {
			return frame.AppendHeaders(d, 2, frame.FlagACK, http.Header{"Streamtype": {"stdout"}}, &lim)
		},
			"01 04 0013 00000002 00000000", stdoutBlock,
			frame.Header{Type: frame.TypeHeaders, Flags: frame.FlagACK, Length: 0x13, StreamID: 2}},
		{"headers-fin-empty", func(d []byte) ([]byte, error) {
			return frame.AppendHeaders(d, 4, frame.FlagFIN, http.Header{}, &lim)
		},
			"01 01 0000 00000004 00000000", nil,
			frame.Header{Type: frame.TypeHeaders, Flags: frame.FlagFIN, StreamID: 4}},
		{"headers-syn-fin", func(d []byte) ([]byte, error) {
			return frame.AppendHeaders(d, 7, frame.FlagSYN|frame.FlagFIN, http.Header{"Port": {"8080"}, "Requestid": {"0"}}, &lim)
		},
			"01 03 0018 00000007 00000000", cat(rawField("port", "8080"), rawField("requestid", "0")),
			frame.Header{Type: frame.TypeHeaders, Flags: frame.FlagSYN | frame.FlagFIN, Length: 0x18, StreamID: 7}},
		{"window-update-session", func(d []byte) ([]byte, error) { return frame.AppendWindowUpdate(d, 0, 1) },
			"02 00 0000 00000000 00000001", nil,
			frame.Header{Type: frame.TypeWindowUpdate, Arg: 1}},
		{"window-update-stream-max", func(d []byte) ([]byte, error) { return frame.AppendWindowUpdate(d, 7, frame.MaxDelta) },
			"02 00 0000 00000007 7fffffff", nil,
			frame.Header{Type: frame.TypeWindowUpdate, StreamID: 7, Arg: frame.MaxDelta}},
		{"rst-stream", func(d []byte) ([]byte, error) { return frame.AppendRSTStream(d, 5, frame.Cancel, "") },
			"03 00 0000 00000005 00000008", nil,
			frame.Header{Type: frame.TypeRSTStream, StreamID: 5, Arg: uint32(frame.Cancel)}},
		{"rst-stream-reason", func(d []byte) ([]byte, error) { return frame.AppendRSTStream(d, 5, 0x1001, "ü") },
			"03 00 0002 00000005 00001001", []byte("ü"),
			frame.Header{Type: frame.TypeRSTStream, Length: 2, StreamID: 5, Arg: 0x1001}},
		{"rst-stream-reason-128", func(d []byte) ([]byte, error) {
			return frame.AppendRSTStream(d, 9, frame.ConnectError, reason128)
		},
			"03 00 0080 00000009 0000000a", []byte(reason128),
			frame.Header{Type: frame.TypeRSTStream, Length: 128, StreamID: 9, Arg: uint32(frame.ConnectError)}},
		{"stop-sending", func(d []byte) ([]byte, error) { return frame.AppendStopSending(d, 9, frame.NoError) },
			"04 00 0000 00000009 00000000", nil,
			frame.Header{Type: frame.TypeStopSending, StreamID: 9}},
		{"stop-sending-app", func(d []byte) ([]byte, error) {
			return frame.AppendStopSending(d, 10, frame.LastApplicationCode)
		},
			"04 00 0000 0000000a 0000ffff", nil,
			frame.Header{Type: frame.TypeStopSending, StreamID: 10, Arg: 0xffff}},
		{"ping", func(d []byte) ([]byte, error) { return ok(frame.AppendPing(d, false, 0xdeadbeef)) },
			"05 00 0000 00000000 deadbeef", nil,
			frame.Header{Type: frame.TypePing, Arg: 0xdeadbeef}},
		{"ping-ack", func(d []byte) ([]byte, error) { return ok(frame.AppendPing(d, true, 0xffffffff)) },
			"05 04 0000 00000000 ffffffff", nil,
			frame.Header{Type: frame.TypePing, Flags: frame.FlagACK, Arg: 0xffffffff}},
		{"goaway", func(d []byte) ([]byte, error) { return frame.AppendGoAway(d, 0, frame.NoError, "") },
			"06 00 0000 00000000 00000000", nil,
			frame.Header{Type: frame.TypeGoAway}},
		{"goaway-debug", func(d []byte) ([]byte, error) {
			return frame.AppendGoAway(d, frame.MaxStreamID, frame.EnhanceYourCalm, "bye")
		},
			"06 00 0003 7fffffff 0000000b", []byte("bye"),
			frame.Header{Type: frame.TypeGoAway, Length: 3, StreamID: frame.MaxStreamID, Arg: uint32(frame.EnhanceYourCalm)}},
		{"goaway-debug-256", func(d []byte) ([]byte, error) { return frame.AppendGoAway(d, 4, frame.MemoryLimit, debug256) },
			"06 00 0100 00000004 00000015", []byte(debug256),
			frame.Header{Type: frame.TypeGoAway, Length: 256, StreamID: 4, Arg: uint32(frame.MemoryLimit)}},
		{"settings-empty", func(d []byte) ([]byte, error) { return ok(frame.AppendSettings(d, &frame.Settings{})) },
			"07 00 0000 00000000 00000000", nil,
			frame.Header{Type: frame.TypeSettings}},
		{"settings", func(d []byte) ([]byte, error) {
			s := settingsOf(t, uint32(frame.SettingMaxDataPayload), 16384, uint32(frame.SettingInitialStreamWindow), 256<<10)
			return ok(frame.AppendSettings(d, s))
		},
			"07 00 000c 00000000 00000000", hx("0001 00004000 0003 00040000"),
			frame.Header{Type: frame.TypeSettings, Length: 12}},
		{"settings-16", func(d []byte) ([]byte, error) { return ok(frame.AppendSettings(d, &settings16)) },
			"07 00 0060 00000000 00000000", payload16,
			frame.Header{Type: frame.TypeSettings, Length: 96}},
		{"max-streams", func(d []byte) ([]byte, error) { return frame.AppendMaxStreams(d, 100) },
			"08 00 0000 00000000 00000064", nil,
			frame.Header{Type: frame.TypeMaxStreams, Arg: 100}},
		{"max-streams-zero", func(d []byte) ([]byte, error) { return frame.AppendMaxStreams(d, 0) },
			"08 00 0000 00000000 00000000", nil,
			frame.Header{Type: frame.TypeMaxStreams}},
		{"max-streams-max", func(d []byte) ([]byte, error) { return frame.AppendMaxStreams(d, frame.MaxCredit) },
			"08 00 0000 00000000 7fffffff", nil,
			frame.Header{Type: frame.TypeMaxStreams, Arg: frame.MaxCredit}},
	}
	seen := map[frame.Type]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Len(t, tc.payload, int(tc.want.Length), "test case: Length must match the payload")
			wire := cat(hx(tc.head), tc.payload)

			// Encode after a prefix: the prefix stays, the frame is exactly wire.
			prefix := []byte("pre")
			b, err := tc.enc(prefix)
			require.NoError(t, err)
			require.Equal(t, prefix, b[:len(prefix)])
			require.Equal(t, wire, b[len(prefix):])
			b = b[len(prefix):]

			// Decode: same header and payload, whole input taken.
			lim := frame.DefaultLimits()
			f, n, err := frame.Parse(b, &lim)
			require.NoError(t, err)
			require.Equal(t, len(b), n)
			require.Equal(t, tc.want, f.Header)
			require.Equal(t, string(tc.payload), string(f.Payload))
			require.Equal(t, len(f.Payload), cap(f.Payload), "payload capacity must end with the frame")
			if len(f.Payload) > 0 {
				require.Same(t, &b[frame.HeaderSize], &f.Payload[0], "payload must alias the input")
			}
			h, err := frame.ParseHeader(b)
			require.NoError(t, err)
			require.Equal(t, tc.want, h)
			require.Equal(t, b[:frame.HeaderSize], frame.AppendHeader(nil, f.Header))

			// Trailing bytes belong to the next frame.
			f2, n2, err := frame.Parse(cat(b, []byte{0xff}), &lim)
			require.NoError(t, err)
			require.Equal(t, n, n2)
			require.Equal(t, f.Header, f2.Header)
			seen[f.Type] = true
		})
	}
	for ty := frame.TypeData; ty <= frame.TypeMaxStreams; ty++ {
		require.True(t, seen[ty], "no round-trip case for %v", ty)
	}
}

func TestAppendHeaderUnchecked(t *testing.T) {
	h := frame.Header{Type: 0xff, Flags: 0xff, Length: 0xffff, StreamID: 0xffffffff, Arg: 0xffffffff}
	require.Equal(t, bytes.Repeat([]byte{0xff}, 12), frame.AppendHeader(nil, h))
	h = frame.Header{Type: 1, Flags: 2, Length: 0x0304, StreamID: 0x05060708, Arg: 0x090a0b0c}
	require.Equal(t, hx("01 02 0304 05060708 090a0b0c"), frame.AppendHeader([]byte{}, h))
}

func TestFlags(t *testing.T) {
	require.Equal(t, frame.Flags(1), frame.FlagFIN)
	require.Equal(t, frame.Flags(2), frame.FlagSYN)
	require.Equal(t, frame.Flags(4), frame.FlagACK)
	cases := []struct {
		f, v frame.Flags
		want bool
	}{
		{0, 0, true},
		{frame.FlagFIN, 0, true},
		{frame.FlagFIN, frame.FlagFIN, true},
		{frame.FlagFIN, frame.FlagSYN, false},
		{0, frame.FlagACK, false},
		{frame.FlagSYN | frame.FlagFIN, frame.FlagSYN, true},
		{frame.FlagSYN | frame.FlagFIN, frame.FlagFIN, true},
		{frame.FlagSYN | frame.FlagFIN, frame.FlagSYN | frame.FlagFIN, true},
		{frame.FlagSYN, frame.FlagSYN | frame.FlagACK, false},
		{0xff, frame.FlagSYN | frame.FlagACK | frame.FlagFIN, true},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, tc.f.Has(tc.v), "%#x.Has(%#x)", tc.f, tc.v)
	}

	// Flags decoded from the wire.
	lim := frame.DefaultLimits()
	f, _, err := frame.Parse(rawFrame(1, 0x3, 1, 0, nil), &lim)
	require.NoError(t, err)
	require.True(t, f.Flags.Has(frame.FlagSYN))
	require.True(t, f.Flags.Has(frame.FlagFIN))
	require.False(t, f.Flags.Has(frame.FlagACK))
	f, _, err = frame.Parse(rawFrame(5, 0x4, 0, 7, nil), &lim)
	require.NoError(t, err)
	require.True(t, f.Flags.Has(frame.FlagACK))
}

func TestTypeString(t *testing.T) {
	want := []string{"DATA", "HEADERS", "WINDOW_UPDATE", "RST_STREAM", "STOP_SENDING", "PING", "GOAWAY", "SETTINGS", "MAX_STREAMS"}
	for i, w := range want {
		require.Equal(t, w, frame.Type(i).String())
	}
	require.Equal(t, "RECEIVED", frame.Type(9).String()) // the resumption extension's type
	require.Equal(t, "UNKNOWN", frame.Type(10).String())
	require.Equal(t, "UNKNOWN", frame.Type(0xff).String())
}

func TestHeaderCode(t *testing.T) {
	require.Equal(t, frame.Cancel, frame.Header{Arg: 8}.Code())
	require.Equal(t, frame.ErrorCode(0x1234), frame.Header{Arg: 0x1234}.Code())
}

func TestErrorCodeString(t *testing.T) {
	cases := []struct {
		c    frame.ErrorCode
		want string
		app  bool
	}{
		{frame.NoError, "NO_ERROR", false},
		{frame.ProtocolError, "PROTOCOL_ERROR", false},
		{frame.InternalError, "INTERNAL_ERROR", false},
		{frame.FlowControlError, "FLOW_CONTROL_ERROR", false},
		{frame.SettingsTimeout, "SETTINGS_TIMEOUT", false},
		{frame.StreamClosed, "STREAM_CLOSED", false},
		{frame.FrameSizeError, "FRAME_SIZE_ERROR", false},
		{frame.RefusedStream, "REFUSED_STREAM", false},
		{frame.Cancel, "CANCEL", false},
		{frame.ConnectError, "CONNECT_ERROR", false},
		{frame.EnhanceYourCalm, "ENHANCE_YOUR_CALM", false},
		{frame.StreamLimit, "STREAM_LIMIT_ERROR", false},
		{frame.HeaderTooLarge, "HEADER_TOO_LARGE", false},
		{frame.IdleTimeout, "IDLE_TIMEOUT", false},
		{frame.KeepaliveTimeout, "KEEPALIVE_TIMEOUT", false},
		{frame.StallTimeout, "STALL_TIMEOUT", false},
		{frame.MemoryLimit, "MEMORY_LIMIT", false},
		{0x9, "UNKNOWN_0x9", false}, // a gap in the table
		{0xc, "UNKNOWN_0xc", false},
		{0x16, "UNKNOWN_0x16", false},
		{0xfff, "UNKNOWN_0xfff", false},
		{frame.FirstApplicationCode, "APPLICATION_0x1000", true},
		{0x1001, "APPLICATION_0x1001", true},
		{frame.LastApplicationCode, "APPLICATION_0xffff", true},
		{0x10000, "UNKNOWN_0x10000", false},
		{0xffffffff, "UNKNOWN_0xffffffff", false},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, tc.c.String())
		require.Equal(t, tc.app, tc.c.IsApplication(), "%v", tc.c)
	}
	// The values are HTTP/2's and the spec's (docs/spec/wsmux-v1.md section 10).
	require.Equal(t, []frame.ErrorCode{0, 1, 2, 3, 4, 5, 6, 7, 8, 0xa, 0xb, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15}, []frame.ErrorCode{
		frame.NoError, frame.ProtocolError, frame.InternalError, frame.FlowControlError, frame.SettingsTimeout,
		frame.StreamClosed, frame.FrameSizeError, frame.RefusedStream, frame.Cancel, frame.ConnectError,
		frame.EnhanceYourCalm, frame.StreamLimit, frame.HeaderTooLarge, frame.IdleTimeout,
		frame.KeepaliveTimeout, frame.StallTimeout, frame.MemoryLimit,
	})
}

func TestErrorMessage(t *testing.T) {
	require.Equal(t, "frame: unknown frame type (PROTOCOL_ERROR)", frame.ErrUnknownType.Error())
	require.Equal(t, "frame: x (APPLICATION_0x1234)", (&frame.Error{Code: 0x1234, Reason: "x"}).Error())
}

func TestDefaultLimits(t *testing.T) {
	require.Equal(t, frame.Limits{
		MaxDataPayload: 16 << 10,
		Block:          frame.BlockLimits{MaxBytes: 8 << 10, MaxFields: 64, MaxName: 64, MaxValue: 4 << 10},
	}, frame.DefaultLimits())
	require.Equal(t, frame.DefaultLimits().Block, frame.DefaultBlockLimits())
}

func TestSettingsGetSetAt(t *testing.T) {
	var s frame.Settings
	require.Equal(t, 0, s.Len())
	_, ok := s.Get(frame.SettingMaxDataPayload)
	require.False(t, ok)

	require.NoError(t, s.Set(frame.SettingInitialStreamWindow, 256<<10))
	require.NoError(t, s.Set(frame.SettingMaxDataPayload, 16<<10))
	require.NoError(t, s.Set(0x7777, 42)) // unknown ids are kept
	require.Equal(t, 3, s.Len())
	require.Equal(t, frame.Setting{ID: frame.SettingInitialStreamWindow, Value: 256 << 10}, s.At(0))
	require.Equal(t, frame.Setting{ID: frame.SettingMaxDataPayload, Value: 16 << 10}, s.At(1))
	require.Equal(t, frame.Setting{ID: 0x7777, Value: 42}, s.At(2))
	v, ok := s.Get(frame.SettingMaxDataPayload)
	require.True(t, ok)
	require.Equal(t, uint32(16<<10), v)

	// Replacing keeps the position and the count.
	require.NoError(t, s.Set(frame.SettingInitialStreamWindow, 1))
	require.Equal(t, 3, s.Len())
	require.Equal(t, frame.Setting{ID: frame.SettingInitialStreamWindow, Value: 1}, s.At(0))

	// An out-of-range value changes nothing.
	require.Same(t, frame.ErrSettingsValue, s.Set(frame.SettingMaxDataPayload, 1))
	v, _ = s.Get(frame.SettingMaxDataPayload)
	require.Equal(t, uint32(16<<10), v)

	// Full: a 17th id fails, replacing still works.
	for id := frame.SettingID(0x100); s.Len() < frame.MaxSettings; id++ {
		require.NoError(t, s.Set(id, uint32(id)))
	}
	require.Same(t, frame.ErrSettingsLength, s.Set(0x200, 1))
	require.Equal(t, frame.MaxSettings, s.Len())
	require.NoError(t, s.Set(0x7777, 43))
	v, _ = s.Get(0x7777)
	require.Equal(t, uint32(43), v)

	// Round trip through the wire, entries in order.
	b := frame.AppendSettings(nil, &s)
	lim := frame.DefaultLimits()
	f, _, err := frame.Parse(b, &lim)
	require.NoError(t, err)
	var got frame.Settings
	require.NoError(t, frame.ParseSettings(f.Payload, &got))
	require.Equal(t, s, got)

	// ParseSettings replaces what was there.
	require.NoError(t, frame.ParseSettings(rawSetting(5, 10), &got))
	require.Equal(t, 1, got.Len())
	require.Equal(t, frame.Setting{ID: frame.SettingInitialMaxStreams, Value: 10}, got.At(0))
	require.NoError(t, frame.ParseSettings(nil, &got))
	require.Equal(t, 0, got.Len())

	// On error it leaves s empty.
	require.NoError(t, frame.ParseSettings(rawSetting(5, 10), &got))
	require.Same(t, frame.ErrSettingsDuplicate, frame.ParseSettings(cat(rawSetting(1, 4096), rawSetting(2, 2048), rawSetting(1, 4096)), &got))
	require.Equal(t, 0, got.Len())
}

func TestSettingsValueRanges(t *testing.T) {
	cases := []struct {
		id     frame.SettingID
		v      uint32
		wantOK bool
	}{
		{frame.SettingMaxDataPayload, 4095, false},
		{frame.SettingMaxDataPayload, 4096, true},
		{frame.SettingMaxDataPayload, 65535, true},
		{frame.SettingMaxDataPayload, 65536, false},
		{frame.SettingMaxHeaderBytes, 1023, false},
		{frame.SettingMaxHeaderBytes, 1024, true},
		{frame.SettingMaxHeaderBytes, 65535, true},
		{frame.SettingMaxHeaderBytes, 65536, false},
		{frame.SettingInitialStreamWindow, 0, true},
		{frame.SettingInitialStreamWindow, 1<<31 - 1, true},
		{frame.SettingInitialStreamWindow, 1 << 31, false},
		{frame.SettingInitialSessionWindow, 0, true},
		{frame.SettingInitialSessionWindow, 1<<31 - 1, true},
		{frame.SettingInitialSessionWindow, 1 << 31, false},
		{frame.SettingInitialMaxStreams, 0, true},
		{frame.SettingInitialMaxStreams, 1<<31 - 1, true},
		{frame.SettingInitialMaxStreams, 1 << 31, false},
		{frame.SettingMaxMessageSize, 65535, false},
		{frame.SettingMaxMessageSize, 65536, true},
		{frame.SettingMaxMessageSize, 1<<31 - 1, true},
		{frame.SettingMaxMessageSize, 1 << 31, false},
		{frame.SettingKeepAliveHintMS, 0, true},
		{frame.SettingKeepAliveHintMS, 0xffffffff, true},
		{frame.SettingFeatures, 0xffffffff, true},
		{0, 0xffffffff, true},
		{0xffff, 0xffffffff, true},
	}
	lim := frame.DefaultLimits()
	for _, tc := range cases {
		var s frame.Settings
		err := s.Set(tc.id, tc.v)
		var p frame.Settings
		perr := frame.ParseSettings(rawSetting(uint16(tc.id), tc.v), &p)
		_, _, ferr := frame.Parse(rawFrame(7, 0, 0, 0, rawSetting(uint16(tc.id), tc.v)), &lim)
		if tc.wantOK {
			require.NoError(t, err, "Set(%d, %d)", tc.id, tc.v)
			require.NoError(t, perr, "ParseSettings(%d, %d)", tc.id, tc.v)
			require.NoError(t, ferr, "Parse(SETTINGS %d=%d)", tc.id, tc.v)
		} else {
			require.Same(t, frame.ErrSettingsValue, err, "Set(%d, %d)", tc.id, tc.v)
			require.Same(t, frame.ErrSettingsValue, perr, "ParseSettings(%d, %d)", tc.id, tc.v)
			require.Same(t, frame.ErrSettingsValue, ferr, "Parse(SETTINGS %d=%d)", tc.id, tc.v)
		}
	}
}

// testMessage returns a message holding one frame of every type, in an order
// a session might send them, and the types in that order.
func testMessage(t testing.TB) ([]byte, []frame.Type) {
	t.Helper()
	lim := frame.DefaultBlockLimits()
	var b []byte
	var err error
	must := func(nb []byte, e error) []byte {
		t.Helper()
		require.NoError(t, e)
		return nb
	}
	b = frame.AppendSettings(b, settingsOf(t, uint32(frame.SettingMaxDataPayload), 16<<10, uint32(frame.SettingInitialMaxStreams), 100))
	b = must(frame.AppendHeaders(b, 1, frame.FlagSYN, http.Header{"Streamtype": {"stdout"}, "X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}, &lim))
	b = must(frame.AppendData(b, 1, false, []byte("hello, ")))
	b = must(frame.AppendData(b, 1, true, []byte("world")))
	b = must(frame.AppendWindowUpdate(b, 0, 65536))
	b = frame.AppendPing(b, false, 42)
	b = must(frame.AppendRSTStream(b, 3, frame.Cancel, "gone"))
	b = must(frame.AppendStopSending(b, 5, frame.Cancel))
	b = must(frame.AppendMaxStreams(b, 200))
	b, err = frame.AppendGoAway(b, 6, frame.NoError, "done")
	require.NoError(t, err)
	return b, []frame.Type{
		frame.TypeSettings, frame.TypeHeaders, frame.TypeData, frame.TypeData, frame.TypeWindowUpdate,
		frame.TypePing, frame.TypeRSTStream, frame.TypeStopSending, frame.TypeMaxStreams, frame.TypeGoAway,
	}
}

func TestIterator(t *testing.T) {
	msg, types := testMessage(t)
	var it frame.Iterator
	require.False(t, it.Next(), "the zero Iterator holds no message")
	require.NoError(t, it.Err())
	require.Equal(t, 0, it.Count())

	it.Reset(msg, frame.DefaultLimits())
	var got []frame.Type
	var data []byte
	off := 0
	for it.Next() {
		f := it.Frame()
		got = append(got, f.Type)
		require.Equal(t, len(got), it.Count())
		if len(f.Payload) > 0 {
			require.Same(t, &msg[off+frame.HeaderSize], &f.Payload[0])
		}
		if f.Type == frame.TypeData {
			data = append(data, f.Payload...)
		}
		off += frame.HeaderSize + len(f.Payload)
	}
	require.NoError(t, it.Err())
	require.Equal(t, types, got)
	require.Equal(t, len(types), it.Count())
	require.Equal(t, len(msg), off)
	require.Equal(t, "hello, world", string(data))
	require.False(t, it.Next(), "Next after the end")
	require.Equal(t, len(types), it.Count())
	require.Equal(t, frame.TypeGoAway, it.Frame().Type, "Frame keeps the last frame")

	// Reset starts over and clears the count.
	it.Reset(msg[:frame.HeaderSize+int(msg[3])], frame.DefaultLimits())
	require.True(t, it.Next())
	require.Equal(t, frame.TypeSettings, it.Frame().Type)
	require.False(t, it.Next())
	require.NoError(t, it.Err())
	require.Equal(t, 1, it.Count())
}

func TestIteratorStopsAtError(t *testing.T) {
	good := cat(rawFrame(0, 0, 1, 0, []byte("ab")), rawFrame(5, 0, 0, 1, nil))
	msg := cat(good, rawHeader(9, 0, 0, 0, 0), rawFrame(5, 0, 0, 2, nil))
	var it frame.Iterator
	it.Reset(msg, frame.DefaultLimits())
	require.True(t, it.Next())
	require.True(t, it.Next())
	require.False(t, it.Next())
	require.Same(t, frame.ErrUnknownType, it.Err())
	require.Equal(t, 2, it.Count())
	require.Equal(t, frame.TypePing, it.Frame().Type, "Frame keeps the last good frame")
	require.False(t, it.Next(), "the walk stays stopped")
	require.Same(t, frame.ErrUnknownType, it.Err())
	require.Equal(t, 2, it.Count())

	// Reset clears the error.
	it.Reset(good, frame.DefaultLimits())
	for it.Next() {
	}
	require.NoError(t, it.Err())
	require.Equal(t, 2, it.Count())
}

func TestIteratorLimits(t *testing.T) {
	lim := frame.DefaultLimits()
	lim.MaxDataPayload = frame.MinMaxDataPayload
	ok := rawFrame(0, 0, 1, 0, make([]byte, frame.MinMaxDataPayload))
	var it frame.Iterator
	it.Reset(cat(ok, ok), lim)
	for it.Next() {
	}
	require.NoError(t, it.Err())
	require.Equal(t, 2, it.Count())

	it.Reset(cat(ok, rawFrame(0, 0, 1, 0, make([]byte, frame.MinMaxDataPayload+1))), lim)
	for it.Next() {
	}
	require.Same(t, frame.ErrDataTooLarge, it.Err())
	require.Equal(t, 1, it.Count())

	// The limits are copied: changing lim after Reset does not matter.
	it.Reset(ok, lim)
	lim.MaxDataPayload = 1
	require.True(t, it.Next())
}
