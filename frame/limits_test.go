package frame_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// What the encoder refuses, and every limit checked on both sides of it.

// TestEncoderRejects checks that the encoder refuses what the decoder
// refuses, with the same error, and leaves dst as it was.
func TestEncoderRejects(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	cases := []struct {
		name string
		enc  func(dst []byte) ([]byte, error)
		want *frame.Error
	}{
		{"WINDOW_UPDATE delta 0", func(d []byte) ([]byte, error) { return frame.AppendWindowUpdate(d, 1, 0) }, frame.ErrZeroDelta},
		{"WINDOW_UPDATE delta 2^31", func(d []byte) ([]byte, error) { return frame.AppendWindowUpdate(d, 0, 1<<31) }, frame.ErrDeltaTooLarge},
		{"WINDOW_UPDATE stream bit 31", func(d []byte) ([]byte, error) { return frame.AppendWindowUpdate(d, 1<<31, 1) }, frame.ErrReservedBit},
		{"DATA stream bit 31", func(d []byte) ([]byte, error) { return frame.AppendData(d, 1<<31|1, false, []byte("x")) }, frame.ErrReservedBit},
		{"DATA stream 0", func(d []byte) ([]byte, error) { return frame.AppendData(d, 0, false, []byte("x")) }, frame.ErrNeedStreamID},
		{"DATA empty without FIN", func(d []byte) ([]byte, error) { return frame.AppendData(d, 1, false, nil) }, frame.ErrEmptyData},
		{"DATA over 65535", func(d []byte) ([]byte, error) { return frame.AppendData(d, 1, false, make([]byte, 1<<16)) }, frame.ErrDataTooLarge},
		{"DATA header empty without FIN", func(d []byte) ([]byte, error) { return frame.AppendDataHeader(d, 1, false, 0) }, frame.ErrEmptyData},
		{"DATA header over 65535", func(d []byte) ([]byte, error) { return frame.AppendDataHeader(d, 1, true, 1<<16) }, frame.ErrDataTooLarge},
		{"DATA header negative", func(d []byte) ([]byte, error) { return frame.AppendDataHeader(d, 1, true, -1) }, frame.ErrDataTooLarge},
		{"DATA header stream 0", func(d []byte) ([]byte, error) { return frame.AppendDataHeader(d, 0, true, 1) }, frame.ErrNeedStreamID},
		{"HEADERS SYN and ACK", func(d []byte) ([]byte, error) {
			return frame.AppendHeaders(d, 1, frame.FlagSYN|frame.FlagACK, http.Header{}, &lim)
		}, frame.ErrSynAndAck},
		{"HEADERS unknown flag", func(d []byte) ([]byte, error) { return frame.AppendHeaders(d, 1, 0x8, http.Header{}, &lim) }, frame.ErrUnknownFlags},
		{"HEADERS stream 0", func(d []byte) ([]byte, error) { return frame.AppendHeaders(d, 0, frame.FlagSYN, http.Header{}, &lim) }, frame.ErrNeedStreamID},
		{"HEADERS stream bit 31", func(d []byte) ([]byte, error) {
			return frame.AppendHeadersBlock(d, 1<<31, frame.FlagSYN, nil)
		}, frame.ErrReservedBit},
		{"HEADERS block SYN and ACK", func(d []byte) ([]byte, error) {
			return frame.AppendHeadersBlock(d, 1, frame.FlagSYN|frame.FlagACK, nil)
		}, frame.ErrSynAndAck},
		{"HEADERS block over 65535", func(d []byte) ([]byte, error) {
			return frame.AppendHeadersBlock(d, 1, 0, make([]byte, 1<<16))
		}, frame.ErrHeadersTooLarge},
		{"HEADERS bad value", func(d []byte) ([]byte, error) {
			return frame.AppendHeaders(d, 1, frame.FlagSYN, http.Header{"A": {"x\ny"}}, &lim)
		}, frame.ErrBlockBadValue},
		{"RST_STREAM reason 129", func(d []byte) ([]byte, error) {
			return frame.AppendRSTStream(d, 1, frame.Cancel, strings.Repeat("r", 129))
		}, frame.ErrReasonTooLong},
		{"RST_STREAM reason 129 and not UTF-8", func(d []byte) ([]byte, error) {
			return frame.AppendRSTStream(d, 1, frame.Cancel, strings.Repeat("\xff", 129))
		}, frame.ErrReasonTooLong}, // as the decoder: length first
		{"RST_STREAM reason not UTF-8", func(d []byte) ([]byte, error) { return frame.AppendRSTStream(d, 1, frame.Cancel, "\xff") }, frame.ErrNotUTF8},
		{"RST_STREAM stream 0", func(d []byte) ([]byte, error) { return frame.AppendRSTStream(d, 0, frame.Cancel, "") }, frame.ErrNeedStreamID},
		{"RST_STREAM stream bit 31", func(d []byte) ([]byte, error) { return frame.AppendRSTStream(d, 1<<31, frame.Cancel, "") }, frame.ErrReservedBit},
		{"STOP_SENDING stream 0", func(d []byte) ([]byte, error) { return frame.AppendStopSending(d, 0, frame.Cancel) }, frame.ErrNeedStreamID},
		{"STOP_SENDING stream bit 31", func(d []byte) ([]byte, error) { return frame.AppendStopSending(d, 1<<31, frame.Cancel) }, frame.ErrReservedBit},
		{"GOAWAY debug 257", func(d []byte) ([]byte, error) {
			return frame.AppendGoAway(d, 1, frame.NoError, strings.Repeat("d", 257))
		}, frame.ErrDebugTooLong},
		{"GOAWAY debug not UTF-8", func(d []byte) ([]byte, error) { return frame.AppendGoAway(d, 1, frame.NoError, "\xed\xa0\x80") }, frame.ErrNotUTF8},
		{"GOAWAY stream bit 31", func(d []byte) ([]byte, error) { return frame.AppendGoAway(d, 1<<31, frame.NoError, "") }, frame.ErrReservedBit},
		{"MAX_STREAMS credit 2^31", func(d []byte) ([]byte, error) { return frame.AppendMaxStreams(d, 1<<31) }, frame.ErrCreditTooLarge},
		{"block name with space", func(d []byte) ([]byte, error) {
			return frame.AppendHeaderBlock(d, http.Header{"Stream Type": {"x"}}, &lim)
		}, frame.ErrBlockBadName},
		{"block name with colon", func(d []byte) ([]byte, error) {
			return frame.AppendHeaderBlock(d, http.Header{":path": {"/"}}, &lim)
		}, frame.ErrBlockBadName},
		{"block name non-ASCII", func(d []byte) ([]byte, error) {
			return frame.AppendHeaderBlock(d, http.Header{"Café": {"x"}}, &lim)
		}, frame.ErrBlockBadName},
		{"block empty name", func(d []byte) ([]byte, error) {
			return frame.AppendHeaderBlock(d, http.Header{"": {"x"}}, &lim)
		}, frame.ErrBlockNameLength},
		{"block value CR", func(d []byte) ([]byte, error) {
			return frame.AppendHeaderBlock(d, http.Header{"A": {"ok", "x\ry"}}, &lim)
		}, frame.ErrBlockBadValue},
		{"block value LF", func(d []byte) ([]byte, error) {
			return frame.AppendHeaderBlock(d, http.Header{"A": {"\n"}}, &lim)
		}, frame.ErrBlockBadValue},
		{"block value NUL", func(d []byte) ([]byte, error) {
			return frame.AppendHeaderBlock(d, http.Header{"A": {"1"}, "B": {"\x00"}}, &lim)
		}, frame.ErrBlockBadValue},
		{"block bad field after good ones", func(d []byte) ([]byte, error) {
			return frame.AppendHeaderBlock(d, http.Header{"A": {"1"}, "B": {"2"}, "Z z": {"3"}}, &lim)
		}, frame.ErrBlockBadName},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, 3, 1<<17)
			copy(dst, "pre")
			got, err := tc.enc(dst)
			checkErr(t, tc.want, tc.want.Code, err, tc.name)
			require.Equal(t, "pre", string(got), "dst must come back as it was")
			require.Same(t, &dst[0], &got[0], "dst must come back as it was")
		})
	}
}

func TestEncoderLowercasesNames(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	b, err := frame.AppendHeaderBlock(nil, http.Header{"X-Stream-PROTOCOL-Version": {"v1"}, "streamtype": {"a"}}, &lim)
	require.NoError(t, err)
	require.Equal(t, cat(rawField("streamtype", "a"), rawField("x-stream-protocol-version", "v1")), b)
}

// TestLimitBoundaries checks every limit on both sides: exactly the limit
// passes, one more fails with the limit's error.
func TestLimitBoundaries(t *testing.T) {
	def := frame.DefaultBlockLimits()
	names := func(n int) http.Header {
		h := http.Header{}
		for i := range n {
			h[fmt.Sprintf("N%03d", i)] = []string{""}
		}
		return h
	}
	kb1 := frame.BlockLimits{MaxBytes: 1000, MaxFields: 64, MaxName: 64, MaxValue: 4096}
	wide := frame.BlockLimits{MaxBytes: 1 << 17, MaxFields: 64, MaxName: 1000, MaxValue: 65535}
	cases := []struct {
		name     string
		lim      frame.BlockLimits
		atLimit  http.Header
		overIt   http.Header
		atWire   []byte // the block atLimit encodes to, written by hand
		overWire []byte
		want     *frame.Error
	}{
		{"MaxFields distinct", def, names(64), names(65), nil, nil, frame.ErrBlockTooMany},
		{"MaxFields repeated", def, http.Header{"A": make([]string, 64)}, http.Header{"A": make([]string, 65)},
			fields(64), fields(65), frame.ErrBlockTooMany},
		{"MaxBytes 1000", kb1, http.Header{"A": {strings.Repeat("v", 996)}}, http.Header{"A": {strings.Repeat("v", 997)}},
			rawField("a", strings.Repeat("v", 996)), rawField("a", strings.Repeat("v", 997)), frame.ErrBlockTooLarge},
		{"MaxBytes default 8192", def,
			http.Header{"A": {strings.Repeat("v", 4096)}, "B": {strings.Repeat("v", 4088)}},
			http.Header{"A": {strings.Repeat("v", 4096)}, "B": {strings.Repeat("v", 4089)}},
			cat(rawField("a", strings.Repeat("v", 4096)), rawField("b", strings.Repeat("v", 4088))),
			cat(rawField("a", strings.Repeat("v", 4096)), rawField("b", strings.Repeat("v", 4089))),
			frame.ErrBlockTooLarge},
		{"MaxName 64", def, http.Header{strings.Repeat("N", 64): {"v"}}, http.Header{strings.Repeat("N", 65): {"v"}},
			rawField(strings.Repeat("n", 64), "v"), rawField(strings.Repeat("n", 65), "v"), frame.ErrBlockNameLength},
		{"MaxName 255 (wire maximum)", wide, http.Header{strings.Repeat("N", 255): {"v"}}, http.Header{strings.Repeat("N", 256): {"v"}},
			rawField(strings.Repeat("n", 255), "v"), nil, frame.ErrBlockNameLength},
		{"MaxValue 4096", def, http.Header{"A": {strings.Repeat("v", 4096)}}, http.Header{"A": {strings.Repeat("v", 4097)}},
			rawField("a", strings.Repeat("v", 4096)), rawField("a", strings.Repeat("v", 4097)), frame.ErrBlockValueLength},
		{"MaxValue 65535 (wire maximum)", wide, http.Header{"A": {strings.Repeat("v", 65535)}}, http.Header{"A": {strings.Repeat("v", 65536)}},
			rawField("a", strings.Repeat("v", 65535)), nil, frame.ErrBlockValueLength},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := frame.AppendHeaderBlock(nil, tc.atLimit, &tc.lim)
			require.NoError(t, err, "encode at the limit")
			if tc.atWire != nil {
				require.Equal(t, tc.atWire, b)
			}
			require.NoError(t, frame.CheckHeaderBlock(b, &tc.lim), "decode at the limit")
			_, err = frame.AppendHeaderBlock(nil, tc.overIt, &tc.lim)
			checkErr(t, tc.want, tc.want.Code, err, "encode over the limit")
			if tc.atWire != nil {
				require.NoError(t, frame.CheckHeaderBlock(tc.atWire, &tc.lim), "decode at the limit")
			}
			if tc.overWire != nil {
				checkErr(t, tc.want, tc.want.Code, frame.CheckHeaderBlock(tc.overWire, &tc.lim), "decode over the limit")
			}
		})
	}

	t.Run("MaxDataPayload", func(t *testing.T) {
		for _, max := range []int{frame.MinMaxDataPayload, frame.DefaultMaxDataPayload, frame.MaxPayload} {
			lim := frame.DefaultLimits()
			lim.MaxDataPayload = max
			_, _, err := frame.Parse(rawFrame(0, 0, 1, 0, make([]byte, max)), &lim)
			require.NoError(t, err, "DATA of %d under %d", max, max)
			if max < frame.MaxPayload {
				_, _, err = frame.Parse(rawFrame(0, 0, 1, 0, make([]byte, max+1)), &lim)
				checkErr(t, frame.ErrDataTooLarge, frame.FrameSizeError, err, fmt.Sprint("DATA over ", max))
			}
		}
		// The encoder knows no negotiated limit: it stops at what Length can hold.
		_, err := frame.AppendData(nil, 1, false, make([]byte, frame.MaxPayload))
		require.NoError(t, err)
		_, err = frame.AppendData(nil, 1, false, make([]byte, frame.MaxPayload+1))
		checkErr(t, frame.ErrDataTooLarge, frame.FrameSizeError, err, "AppendData")
		_, err = frame.AppendDataHeader(nil, 1, false, frame.MaxPayload)
		require.NoError(t, err)
	})

	t.Run("HEADERS MaxBytes", func(t *testing.T) {
		lim := frame.DefaultLimits()
		_, _, err := frame.Parse(rawFrame(1, 0, 1, 0, fields(2048)), &lim)
		require.Same(t, frame.ErrBlockTooMany, err, "8192 bytes pass the size check and reach the field count")
		lim.Block.MaxFields = 2048
		_, _, err = frame.Parse(rawFrame(1, 0, 1, 0, fields(2048)), &lim)
		require.NoError(t, err)
		_, _, err = frame.Parse(rawFrame(1, 0, 1, 0, cat(fields(2048), []byte{1})), &lim)
		checkErr(t, frame.ErrHeadersTooLarge, frame.HeaderTooLarge, err, "8193 bytes")
	})

	t.Run("reason and debug", func(t *testing.T) {
		lim := frame.DefaultLimits()
		for _, tc := range []struct {
			typ  byte
			max  int
			want *frame.Error
		}{{3, frame.MaxReasonLen, frame.ErrReasonTooLong}, {6, frame.MaxDebugLen, frame.ErrDebugTooLong}} {
			_, _, err := frame.Parse(rawFrame(tc.typ, 0, 1, 0, bytes.Repeat([]byte("x"), tc.max)), &lim)
			require.NoError(t, err)
			_, _, err = frame.Parse(rawFrame(tc.typ, 0, 1, 0, bytes.Repeat([]byte("x"), tc.max+1)), &lim)
			checkErr(t, tc.want, frame.FrameSizeError, err, tc.want.Reason)
		}
		_, err := frame.AppendRSTStream(nil, 1, 0, strings.Repeat("x", frame.MaxReasonLen))
		require.NoError(t, err)
		_, err = frame.AppendGoAway(nil, 1, 0, strings.Repeat("x", frame.MaxDebugLen))
		require.NoError(t, err)
	})

	t.Run("SETTINGS entries", func(t *testing.T) {
		var p []byte
		for id := uint16(0x100); id < 0x100+frame.MaxSettings; id++ {
			p = append(p, rawSetting(id, 1)...)
		}
		var s frame.Settings
		require.NoError(t, frame.ParseSettings(p, &s))
		require.Equal(t, frame.MaxSettings, s.Len())
		checkErr(t, frame.ErrSettingsLength, frame.FrameSizeError, frame.ParseSettings(cat(p, rawSetting(0x200, 1)), &s), "17 entries")
	})

	t.Run("ids and arguments", func(t *testing.T) {
		lim := frame.DefaultLimits()
		for _, tc := range []struct {
			typ         byte
			stream, arg uint32
			want        *frame.Error
		}{
			{0, frame.MaxStreamID + 1, 0, frame.ErrReservedBit},
			{2, 1, frame.MaxDelta + 1, frame.ErrDeltaTooLarge},
			{8, 0, frame.MaxCredit + 1, frame.ErrCreditTooLarge},
		} {
			flags := byte(0)
			if tc.typ == 0 {
				flags = 1
			}
			okStream, okArg := tc.stream, tc.arg
			if tc.want == frame.ErrReservedBit {
				okStream--
			} else {
				okArg--
			}
			_, _, err := frame.Parse(rawFrame(tc.typ, flags, okStream, okArg, nil), &lim)
			require.NoError(t, err)
			_, _, err = frame.Parse(rawFrame(tc.typ, flags, tc.stream, tc.arg, nil), &lim)
			checkErr(t, tc.want, tc.want.Code, err, tc.want.Reason)
		}
	})
}
