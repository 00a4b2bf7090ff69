package frame_test

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// allErrors lists every rule value of errors.go by name.
// TestEveryErrorHasACase fails when errors.go gains an Err... value that is
// not listed here, and when the malformed table has no case for one.
var allErrors = map[string]*frame.Error{
	"ErrEmptyMessage":      frame.ErrEmptyMessage,
	"ErrShortHeader":       frame.ErrShortHeader,
	"ErrShortPayload":      frame.ErrShortPayload,
	"ErrUnknownType":       frame.ErrUnknownType,
	"ErrUnknownFlags":      frame.ErrUnknownFlags,
	"ErrReservedBit":       frame.ErrReservedBit,
	"ErrNeedStreamID":      frame.ErrNeedStreamID,
	"ErrNeedSession":       frame.ErrNeedSession,
	"ErrNonZeroArg":        frame.ErrNonZeroArg,
	"ErrPayloadNotAllowed": frame.ErrPayloadNotAllowed,
	"ErrDataTooLarge":      frame.ErrDataTooLarge,
	"ErrEmptyData":         frame.ErrEmptyData,
	"ErrSynAndAck":         frame.ErrSynAndAck,
	"ErrHeadersTooLarge":   frame.ErrHeadersTooLarge,
	"ErrZeroDelta":         frame.ErrZeroDelta,
	"ErrDeltaTooLarge":     frame.ErrDeltaTooLarge,
	"ErrReasonTooLong":     frame.ErrReasonTooLong,
	"ErrDebugTooLong":      frame.ErrDebugTooLong,
	"ErrNotUTF8":           frame.ErrNotUTF8,
	"ErrSettingsLength":    frame.ErrSettingsLength,
	"ErrSettingsDuplicate": frame.ErrSettingsDuplicate,
	"ErrSettingsValue":     frame.ErrSettingsValue,
	"ErrCreditTooLarge":    frame.ErrCreditTooLarge,
	"ErrBlockTruncated":    frame.ErrBlockTruncated,
	"ErrBlockTooLarge":     frame.ErrBlockTooLarge,
	"ErrBlockTooMany":      frame.ErrBlockTooMany,
	"ErrBlockNameLength":   frame.ErrBlockNameLength,
	"ErrBlockValueLength":  frame.ErrBlockValueLength,
	"ErrBlockBadName":      frame.ErrBlockBadName,
	"ErrBlockBadValue":     frame.ErrBlockBadValue,
}

// How a malformed case is decoded.
type via int

const (
	viaParse    via = iota // frame.Parse, and an Iterator over the same bytes
	viaIterator            // frame.Iterator only (rules of a whole message)
	viaBlock               // CheckHeaderBlock, BlockIterator, DecodeHeaderBlock
	viaSettings            // ParseSettings, and Parse of a SETTINGS frame around it
)

func (v via) String() string { return [...]string{"parse", "iterator", "block", "settings"}[v] }

type malformedCase struct {
	name string
	via  via
	in   []byte
	lim  *frame.Limits // nil: DefaultLimits
	want *frame.Error
	code frame.ErrorCode // the Code the Error must carry
}

// fields returns n fields "a" = "" (4 bytes each).
func fields(n int) []byte { return bytes.Repeat(rawField("a", ""), n) }

func malformedCases() []malformedCase {
	small := frame.DefaultLimits()
	small.MaxDataPayload = frame.MinMaxDataPayload
	small.Block = frame.BlockLimits{MaxBytes: 100, MaxFields: 2, MaxName: 8, MaxValue: 10}
	block := func(name string, in []byte, want *frame.Error, code frame.ErrorCode) malformedCase {
		return malformedCase{name: name, via: viaBlock, in: in, want: want, code: code}
	}
	pc := func(name string, in []byte, want *frame.Error, code frame.ErrorCode) malformedCase {
		return malformedCase{name: name, via: viaParse, in: in, want: want, code: code}
	}
	okData := rawFrame(0, 0, 1, 0, []byte("ok"))
	return []malformedCase{
		// Whole message.
		{name: "empty message", via: viaIterator, in: []byte{}, want: frame.ErrEmptyMessage, code: frame.ProtocolError},
		{name: "nil message", via: viaIterator, in: nil, want: frame.ErrEmptyMessage, code: frame.ProtocolError},
		{name: "trailing partial header", via: viaIterator, in: cat(okData, []byte{0, 0, 0}), want: frame.ErrShortHeader, code: frame.FrameSizeError},
		{name: "second frame short payload", via: viaIterator, in: cat(okData, rawHeader(0, 0, 3, 1, 0), []byte("ab")), want: frame.ErrShortPayload, code: frame.FrameSizeError},

		// Frame header.
		pc("no bytes", nil, frame.ErrShortHeader, frame.FrameSizeError),
		pc("11 bytes", rawHeader(5, 0, 0, 0, 1)[:11], frame.ErrShortHeader, frame.FrameSizeError),
		pc("payload cut short", cat(rawHeader(0, 0, 5, 1, 0), []byte("abcd")), frame.ErrShortPayload, frame.FrameSizeError),
		pc("max length declared, none present", rawHeader(0, 0, 0xffff, 1, 0), frame.ErrShortPayload, frame.FrameSizeError),
		pc("type 9", rawHeader(9, 0, 0, 1, 0), frame.ErrUnknownType, frame.ProtocolError),
		pc("type 0xff", rawHeader(0xff, 0xff, 0xffff, 0xffffffff, 0xffffffff), frame.ErrUnknownType, frame.ProtocolError),
		pc("DATA with SYN", rawFrame(0, 0x2, 1, 0, []byte("x")), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("DATA with bit 0x80", rawFrame(0, 0x81, 1, 0, []byte("x")), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("HEADERS with 0x8", rawFrame(1, 0x8, 1, 0, nil), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("WINDOW_UPDATE with FIN", rawFrame(2, 0x1, 1, 1, nil), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("RST_STREAM with ACK", rawFrame(3, 0x4, 1, 0, nil), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("STOP_SENDING with FIN", rawFrame(4, 0x1, 1, 0, nil), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("PING with FIN", rawFrame(5, 0x1, 0, 0, nil), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("GOAWAY with ACK", rawFrame(6, 0x4, 0, 0, nil), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("SETTINGS with ACK", rawFrame(7, 0x4, 0, 0, nil), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("MAX_STREAMS with SYN", rawFrame(8, 0x2, 0, 0, nil), frame.ErrUnknownFlags, frame.ProtocolError),
		pc("DATA stream bit 31", rawFrame(0, 0, 0x80000001, 0, []byte("x")), frame.ErrReservedBit, frame.ProtocolError),
		pc("GOAWAY stream bit 31", rawFrame(6, 0, 0x80000000, 0, nil), frame.ErrReservedBit, frame.ProtocolError),
		pc("WINDOW_UPDATE stream bit 31", rawFrame(2, 0, 0xffffffff, 1, nil), frame.ErrReservedBit, frame.ProtocolError),
		pc("DATA on stream 0", rawFrame(0, 0, 0, 0, []byte("x")), frame.ErrNeedStreamID, frame.ProtocolError),
		pc("HEADERS on stream 0", rawFrame(1, 0x2, 0, 0, nil), frame.ErrNeedStreamID, frame.ProtocolError),
		pc("RST_STREAM on stream 0", rawFrame(3, 0, 0, 8, nil), frame.ErrNeedStreamID, frame.ProtocolError),
		pc("STOP_SENDING on stream 0", rawFrame(4, 0, 0, 8, nil), frame.ErrNeedStreamID, frame.ProtocolError),
		pc("PING on stream 1", rawFrame(5, 0, 1, 0, nil), frame.ErrNeedSession, frame.ProtocolError),
		pc("SETTINGS on stream 1", rawFrame(7, 0, 1, 0, nil), frame.ErrNeedSession, frame.ProtocolError),
		pc("MAX_STREAMS on stream 2", rawFrame(8, 0, 2, 1, nil), frame.ErrNeedSession, frame.ProtocolError),
		pc("DATA arg", rawFrame(0, 0, 1, 1, []byte("x")), frame.ErrNonZeroArg, frame.ProtocolError),
		pc("HEADERS arg", rawFrame(1, 0, 1, 0x80000000, nil), frame.ErrNonZeroArg, frame.ProtocolError),
		pc("SETTINGS arg", rawFrame(7, 0, 0, 1, nil), frame.ErrNonZeroArg, frame.ProtocolError),
		pc("WINDOW_UPDATE payload", rawFrame(2, 0, 0, 1, []byte{0}), frame.ErrPayloadNotAllowed, frame.FrameSizeError),
		pc("STOP_SENDING payload", rawFrame(4, 0, 1, 0, []byte("x")), frame.ErrPayloadNotAllowed, frame.FrameSizeError),
		pc("PING payload", rawFrame(5, 0, 0, 0, make([]byte, 8)), frame.ErrPayloadNotAllowed, frame.FrameSizeError),
		pc("MAX_STREAMS payload", rawFrame(8, 0, 0, 0, make([]byte, 4)), frame.ErrPayloadNotAllowed, frame.FrameSizeError),
		pc("payload not allowed, declared only", rawHeader(5, 0, 0xffff, 0, 0), frame.ErrPayloadNotAllowed, frame.FrameSizeError),
		pc("empty DATA without FIN", rawFrame(0, 0, 1, 0, nil), frame.ErrEmptyData, frame.ProtocolError),
		pc("HEADERS SYN and ACK", rawFrame(1, 0x6, 1, 0, nil), frame.ErrSynAndAck, frame.ProtocolError),
		pc("HEADERS SYN, ACK and FIN", rawFrame(1, 0x7, 1, 0, nil), frame.ErrSynAndAck, frame.ProtocolError),
		pc("WINDOW_UPDATE delta 0", rawFrame(2, 0, 1, 0, nil), frame.ErrZeroDelta, frame.ProtocolError),
		pc("session WINDOW_UPDATE delta 0", rawFrame(2, 0, 0, 0, nil), frame.ErrZeroDelta, frame.ProtocolError),
		pc("WINDOW_UPDATE delta 2^31", rawFrame(2, 0, 1, 0x80000000, nil), frame.ErrDeltaTooLarge, frame.FlowControlError),
		pc("WINDOW_UPDATE delta 2^32-1", rawFrame(2, 0, 0, 0xffffffff, nil), frame.ErrDeltaTooLarge, frame.FlowControlError),
		pc("RST_STREAM reason 129", rawFrame(3, 0, 1, 8, bytes.Repeat([]byte("r"), 129)), frame.ErrReasonTooLong, frame.FrameSizeError),
		pc("RST_STREAM reason 129, declared only", rawHeader(3, 0, 129, 1, 8), frame.ErrReasonTooLong, frame.FrameSizeError),
		pc("GOAWAY debug 257", rawFrame(6, 0, 0, 0, bytes.Repeat([]byte("d"), 257)), frame.ErrDebugTooLong, frame.FrameSizeError),
		pc("MAX_STREAMS credit 2^31", rawFrame(8, 0, 0, 0x80000000, nil), frame.ErrCreditTooLarge, frame.ProtocolError),

		// Payloads.
		pc("DATA 16385 bytes", rawFrame(0, 0, 1, 0, make([]byte, 16385)), frame.ErrDataTooLarge, frame.FrameSizeError),
		{name: "DATA over a negotiated 4096", via: viaParse, in: rawFrame(0, 1, 1, 0, make([]byte, 4097)), lim: &small, want: frame.ErrDataTooLarge, code: frame.FrameSizeError},
		pc("HEADERS block 8193 bytes", rawFrame(1, 0x2, 1, 0, cat(fields(2048), []byte{0})), frame.ErrHeadersTooLarge, frame.HeaderTooLarge),
		{name: "HEADERS block over a negotiated 100", via: viaParse, in: rawFrame(1, 0, 1, 0, fields(26)), lim: &small, want: frame.ErrHeadersTooLarge, code: frame.HeaderTooLarge},
		pc("RST_STREAM reason 0xff", rawFrame(3, 0, 1, 8, []byte{0xff}), frame.ErrNotUTF8, frame.ProtocolError),
		pc("RST_STREAM reason cut rune", rawFrame(3, 0, 1, 8, []byte("ok\xc3")), frame.ErrNotUTF8, frame.ProtocolError),
		pc("GOAWAY debug bad continuation", rawFrame(6, 0, 0, 0, []byte("\xc3\x28")), frame.ErrNotUTF8, frame.ProtocolError),
		pc("GOAWAY debug surrogate", rawFrame(6, 0, 0, 0, []byte("\xed\xa0\x80")), frame.ErrNotUTF8, frame.ProtocolError),
		pc("SETTINGS length 5", rawFrame(7, 0, 0, 0, make([]byte, 5)), frame.ErrSettingsLength, frame.FrameSizeError),
		pc("SETTINGS 17 entries", rawFrame(7, 0, 0, 0, bytes.Repeat(rawSetting(0x100, 1), 17)), frame.ErrSettingsLength, frame.FrameSizeError),
		pc("SETTINGS duplicate", rawFrame(7, 0, 0, 0, cat(rawSetting(3, 1), rawSetting(4, 1), rawSetting(3, 2))), frame.ErrSettingsDuplicate, frame.ProtocolError),
		pc("SETTINGS value", rawFrame(7, 0, 0, 0, rawSetting(1, 4095)), frame.ErrSettingsValue, frame.ProtocolError),
		pc("HEADERS bad name", rawFrame(1, 0x2, 1, 0, rawField("Streamtype", "stdout")), frame.ErrBlockBadName, frame.ProtocolError),
		pc("HEADERS truncated field", rawFrame(1, 0x2, 1, 0, rawField("streamtype", "stdout")[:15]), frame.ErrBlockTruncated, frame.ProtocolError),

		// SETTINGS payload on its own.
		{name: "settings payload 7 bytes", via: viaSettings, in: make([]byte, 7), want: frame.ErrSettingsLength, code: frame.FrameSizeError},
		{name: "settings payload 102 bytes", via: viaSettings, in: bytes.Repeat(rawSetting(0x100, 1), 17), want: frame.ErrSettingsLength, code: frame.FrameSizeError},
		{name: "settings duplicate unknown id", via: viaSettings, in: cat(rawSetting(0x9999, 1), rawSetting(0x9999, 1)), want: frame.ErrSettingsDuplicate, code: frame.ProtocolError},
		{name: "settings max payload 65536", via: viaSettings, in: rawSetting(1, 65536), want: frame.ErrSettingsValue, code: frame.ProtocolError},
		{name: "settings header bytes 1023", via: viaSettings, in: rawSetting(2, 1023), want: frame.ErrSettingsValue, code: frame.ProtocolError},
		{name: "settings stream window 2^31", via: viaSettings, in: rawSetting(3, 1<<31), want: frame.ErrSettingsValue, code: frame.ProtocolError},
		{name: "settings session window 2^31", via: viaSettings, in: rawSetting(4, 1<<31), want: frame.ErrSettingsValue, code: frame.ProtocolError},
		{name: "settings max streams 2^31", via: viaSettings, in: rawSetting(5, 1<<31), want: frame.ErrSettingsValue, code: frame.ProtocolError},
		{name: "settings message size 65535", via: viaSettings, in: rawSetting(6, 65535), want: frame.ErrSettingsValue, code: frame.ProtocolError},

		// Header blocks.
		block("name cut", []byte{3, 'a', 'b'}, frame.ErrBlockTruncated, frame.ProtocolError),
		block("value length cut", []byte{1, 'a', 0}, frame.ErrBlockTruncated, frame.ProtocolError),
		block("value cut", cat([]byte{1, 'a', 0, 5}, []byte("abcd")), frame.ErrBlockTruncated, frame.ProtocolError),
		block("second field cut", cat(rawField("a", "b"), []byte{2, 'c'}), frame.ErrBlockTruncated, frame.ProtocolError),
		block("8193 bytes", cat(fields(2048), []byte{0}), frame.ErrBlockTooLarge, frame.HeaderTooLarge),
		{name: "over a negotiated 100 bytes", via: viaBlock, in: make([]byte, 101), lim: &small, want: frame.ErrBlockTooLarge, code: frame.HeaderTooLarge},
		block("65 fields", fields(65), frame.ErrBlockTooMany, frame.HeaderTooLarge),
		{name: "over a limit of 2 fields", via: viaBlock, in: fields(3), lim: &small, want: frame.ErrBlockTooMany, code: frame.HeaderTooLarge},
		block("empty name", cat(rawField("a", "b"), []byte{0, 0, 0}), frame.ErrBlockNameLength, frame.HeaderTooLarge),
		block("name 65 bytes", rawField(strings.Repeat("n", 65), "v"), frame.ErrBlockNameLength, frame.HeaderTooLarge),
		block("name 255 bytes declared only", []byte{255}, frame.ErrBlockNameLength, frame.HeaderTooLarge),
		block("value 4097 bytes", rawField("a", strings.Repeat("v", 4097)), frame.ErrBlockValueLength, frame.HeaderTooLarge),
		block("value 0xffff declared only", []byte{1, 'a', 0xff, 0xff}, frame.ErrBlockValueLength, frame.HeaderTooLarge),
		block("uppercase name", rawField("Streamtype", "x"), frame.ErrBlockBadName, frame.ProtocolError),
		block("space in name", rawField("stream type", "x"), frame.ErrBlockBadName, frame.ProtocolError),
		block("colon in name", rawField(":path", "/"), frame.ErrBlockBadName, frame.ProtocolError),
		block("NUL in name", rawField("a\x00", "x"), frame.ErrBlockBadName, frame.ProtocolError),
		block("non-ASCII name", rawField("caf\xc3\xa9", "x"), frame.ErrBlockBadName, frame.ProtocolError),
		block("CR in value", rawField("a", "x\ry"), frame.ErrBlockBadValue, frame.ProtocolError),
		block("LF in value", rawField("a", "x\n"), frame.ErrBlockBadValue, frame.ProtocolError),
		block("NUL in value", rawField("a", "\x00"), frame.ErrBlockBadValue, frame.ProtocolError),
		block("bad value after good fields", cat(rawField("a", "1"), rawField("b", "2"), rawField("c", "\r\n")), frame.ErrBlockBadValue, frame.ProtocolError),
	}
}

// checkErr asserts err is exactly want and carries code.
func checkErr(t *testing.T, want *frame.Error, code frame.ErrorCode, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	require.ErrorIs(t, err, want, what)
	require.Same(t, want, err, what)
	var fe *frame.Error
	require.True(t, errors.As(err, &fe), what)
	require.Equal(t, code, fe.Code, what)
}

func TestMalformed(t *testing.T) {
	for _, tc := range malformedCases() {
		t.Run(tc.via.String()+"/"+tc.name, func(t *testing.T) {
			lim := frame.DefaultLimits()
			if tc.lim != nil {
				lim = *tc.lim
			}
			in := tc.in[:len(tc.in):len(tc.in)]
			switch tc.via {
			case viaParse:
				f, n, err := frame.Parse(in, &lim)
				checkErr(t, tc.want, tc.code, err, "Parse")
				require.Zero(t, n)
				require.Zero(t, f)
				if len(in) == 0 {
					break // an Iterator says ErrEmptyMessage (a case of its own)
				}
				fallthrough
			case viaIterator:
				var it frame.Iterator
				it.Reset(in, lim)
				for it.Next() {
				}
				checkErr(t, tc.want, tc.code, it.Err(), "Iterator")
			case viaSettings:
				var s frame.Settings
				require.NoError(t, s.Set(frame.SettingFeatures, 1))
				checkErr(t, tc.want, tc.code, frame.ParseSettings(in, &s), "ParseSettings")
				require.Zero(t, s.Len(), "ParseSettings leaves s empty on error")
				_, _, err := frame.Parse(rawFrame(7, 0, 0, 0, in), &lim)
				checkErr(t, tc.want, tc.code, err, "Parse of a SETTINGS frame")
			case viaBlock:
				checkErr(t, tc.want, tc.code, frame.CheckHeaderBlock(in, &lim.Block), "CheckHeaderBlock")
				var it frame.BlockIterator
				it.Reset(in, &lim.Block)
				for it.Next() {
				}
				checkErr(t, tc.want, tc.code, it.Err(), "BlockIterator")
				h := http.Header{"Streamtype": {"pre"}}
				checkErr(t, tc.want, tc.code, frame.DecodeHeaderBlock(in, &lim.Block, h), "DecodeHeaderBlock")
				require.Equal(t, http.Header{"Streamtype": {"pre"}}, h, "DecodeHeaderBlock changed h on error")
				if len(in) <= lim.Block.MaxBytes {
					_, _, err := frame.Parse(rawFrame(1, 0x2, 1, 0, in), &lim)
					checkErr(t, tc.want, tc.code, err, "Parse of a HEADERS frame")
				}
			}
		})
	}
}

// TestEveryErrorHasACase checks that allErrors lists exactly the package's
// Err... variables (read from the source) and that the malformed table hits
// each of them, with the Code the variable carries.
func TestEveryErrorHasACase(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var declared []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, id := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(id.Name, "Err") {
						declared = append(declared, id.Name)
					}
				}
			}
		}
	}
	var listed []string
	for name := range allErrors {
		listed = append(listed, name)
	}
	slices.Sort(declared)
	slices.Sort(listed)
	require.Equal(t, declared, listed, "allErrors must list every Err... variable of package frame")

	hit := map[*frame.Error]frame.ErrorCode{}
	for _, tc := range malformedCases() {
		hit[tc.want] = tc.code
	}
	for name, e := range allErrors {
		code, ok := hit[e]
		require.True(t, ok, "no malformed case returns %s", name)
		require.Equal(t, e.Code, code, "%s", name)
	}
	// No two rules share a value or a reason.
	reasons := map[string]string{}
	for name, e := range allErrors {
		require.NotEmpty(t, e.Reason, name)
		prev, dup := reasons[e.Reason]
		require.False(t, dup, "%s and %s share a reason", name, prev)
		reasons[e.Reason] = name
	}
}

// TestTruncatedNeverPanics cuts a valid message, a header block and a
// SETTINGS payload at every length and checks the decoders fail cleanly
// (or succeed exactly at a frame or field boundary).
func TestTruncatedNeverPanics(t *testing.T) {
	msg, types := testMessage(t)
	boundaries := map[int]int{} // offset -> frames before it
	for off, n := 0, 0; off < len(msg); n++ {
		off += frame.HeaderSize + (int(msg[off+2])<<8 | int(msg[off+3]))
		boundaries[off] = n + 1
	}
	require.Len(t, boundaries, len(types))
	lim := frame.DefaultLimits()
	for k := 0; k <= len(msg); k++ {
		cut := msg[:k:k]
		require.NotPanics(t, func() {
			var it frame.Iterator
			it.Reset(cut, lim)
			for it.Next() {
			}
			frames, atBoundary := boundaries[k]
			switch {
			case k == 0:
				require.Same(t, frame.ErrEmptyMessage, it.Err())
			case atBoundary:
				require.NoError(t, it.Err(), "cut at %d", k)
				require.Equal(t, frames, it.Count())
			default:
				err := it.Err()
				require.True(t, err == frame.ErrShortHeader || err == frame.ErrShortPayload, "cut at %d: %v", k, err)
			}
			_, _, _ = frame.Parse(cut, &lim)
			_, _ = frame.ParseHeader(cut)
		}, "cut at %d", k)
	}

	blockLim := frame.DefaultBlockLimits()
	block := cat(rawField("streamtype", "stdout"), rawField("x-stream-protocol-version", "v4.channel.k8s.io"), rawField("a", ""))
	fieldEnds := map[int]bool{0: true, 19: true, 19 + 45: true, len(block): true}
	for k := 0; k <= len(block); k++ {
		cut := block[:k:k]
		require.NotPanics(t, func() {
			err := frame.CheckHeaderBlock(cut, &blockLim)
			if fieldEnds[k] {
				require.NoError(t, err, "block cut at %d", k)
			} else {
				require.Same(t, frame.ErrBlockTruncated, err, "block cut at %d", k)
			}
			h := http.Header{}
			require.Equal(t, err, frame.DecodeHeaderBlock(cut, &blockLim, h))
		}, "block cut at %d", k)
	}

	var s frame.Settings
	payload := cat(rawSetting(1, 16384), rawSetting(3, 1<<20), rawSetting(0x77, 1))
	for k := 0; k <= len(payload); k++ {
		cut := payload[:k:k]
		require.NotPanics(t, func() {
			err := frame.ParseSettings(cut, &s)
			if k%6 == 0 {
				require.NoError(t, err)
				require.Equal(t, k/6, s.Len())
			} else {
				require.Same(t, frame.ErrSettingsLength, err)
			}
		})
	}
}
