package frame_test

import (
	"net/http"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

const allocRuns = 200

// requireAllocs asserts that f allocates exactly want times per run.
func requireAllocs(t *testing.T, want float64, f func()) {
	t.Helper()
	require.Equal(t, want, testing.AllocsPerRun(allocRuns, f), "allocations per run")
}

func TestAllocsEncode(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	buf := make([]byte, 0, 64<<10)
	payload := make([]byte, frame.DefaultMaxDataPayload)
	block, err := frame.AppendHeaderBlock(nil, kubeExecHeader(), &lim)
	require.NoError(t, err)
	h := kubeExecHeader()
	badH := http.Header{"A": {"1"}, "B": {"\n"}}
	s := settingsOf(t, uint32(frame.SettingMaxDataPayload), 16<<10, uint32(frame.SettingInitialStreamWindow), 256<<10,
		uint32(frame.SettingInitialSessionWindow), 1<<20, uint32(frame.SettingInitialMaxStreams), 100)
	var sink []byte
	cases := []struct {
		name string
		enc  func() ([]byte, error)
	}{
		{"data", func() ([]byte, error) { return frame.AppendData(buf, 1, false, payload) }},
		{"data-header", func() ([]byte, error) { return frame.AppendDataHeader(buf, 1, true, len(payload)) }},
		{"headers-block", func() ([]byte, error) { return frame.AppendHeadersBlock(buf, 1, frame.FlagSYN, block) }},
		{"headers", func() ([]byte, error) { return frame.AppendHeaders(buf, 1, frame.FlagSYN, h, &lim) }},
		{"header-block", func() ([]byte, error) { return frame.AppendHeaderBlock(buf, h, &lim) }},
		{"window-update", func() ([]byte, error) { return frame.AppendWindowUpdate(buf, 1, 1<<16) }},
		{"rst-stream", func() ([]byte, error) { return frame.AppendRSTStream(buf, 1, frame.Cancel, "context canceled") }},
		{"stop-sending", func() ([]byte, error) { return frame.AppendStopSending(buf, 1, frame.Cancel) }},
		{"ping", func() ([]byte, error) { return frame.AppendPing(buf, true, 7), nil }},
		{"goaway", func() ([]byte, error) { return frame.AppendGoAway(buf, 7, frame.NoError, "server shutting down") }},
		{"settings", func() ([]byte, error) { return frame.AppendSettings(buf, s), nil }},
		{"max-streams", func() ([]byte, error) { return frame.AppendMaxStreams(buf, 200) }},
		{"header", func() ([]byte, error) {
			return frame.AppendHeader(buf, frame.Header{Type: frame.TypeData, Length: 3, StreamID: 1}), nil
		}},
		// Errors are preallocated values.
		{"error-zero-delta", func() ([]byte, error) {
			_, err := frame.AppendWindowUpdate(buf, 1, 0)
			return buf, ignore(err, frame.ErrZeroDelta)
		}},
		{"error-block-bad-value", func() ([]byte, error) {
			_, err := frame.AppendHeaderBlock(buf, badH, &lim)
			return buf, ignore(err, frame.ErrBlockBadValue)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.enc()
			require.NoError(t, err)
			requireAllocs(t, 0, func() { sink, _ = tc.enc() })
		})
	}
	_ = sink
}

// ignore returns nil when err is want, else err.
func ignore(err error, want *frame.Error) error {
	if err == want {
		return nil
	}
	return err
}

func TestAllocsDecode(t *testing.T) {
	lim := frame.DefaultLimits()
	msg, types := testMessage(t)
	big, err := frame.AppendData(nil, 1, false, make([]byte, frame.DefaultMaxDataPayload))
	require.NoError(t, err)
	frames := [][]byte{big}
	for off := 0; off < len(msg); {
		_, n, err := frame.Parse(msg[off:], &lim)
		require.NoError(t, err)
		frames = append(frames, msg[off:off+n])
		off += n
	}
	require.Len(t, frames, len(types)+1)
	var sinkF frame.Frame
	var sinkH frame.Header
	for _, b := range frames {
		h, _ := frame.ParseHeader(b)
		t.Run("parse/"+h.Type.String(), func(t *testing.T) {
			requireAllocs(t, 0, func() { sinkF, _, _ = frame.Parse(b, &lim) })
			requireAllocs(t, 0, func() { sinkH, _ = frame.ParseHeader(b) })
		})
	}
	t.Run("iterator", func(t *testing.T) {
		var it frame.Iterator
		requireAllocs(t, 0, func() {
			it.Reset(msg, lim)
			for it.Next() {
				sinkF = it.Frame()
			}
		})
		require.Equal(t, len(types), it.Count())
	})
	t.Run("settings", func(t *testing.T) {
		payload := cat(rawSetting(1, 16384), rawSetting(3, 1<<18), rawSetting(4, 1<<20), rawSetting(5, 100), rawSetting(0x77, 1))
		var s frame.Settings
		requireAllocs(t, 0, func() {
			_ = frame.ParseSettings(payload, &s)
			_, _ = s.Get(frame.SettingInitialMaxStreams)
			_ = s.Set(frame.SettingKeepAliveHintMS, 15000)
		})
	})
	t.Run("malformed", func(t *testing.T) {
		for _, tc := range malformedCases() {
			if tc.via != viaParse {
				continue
			}
			requireAllocs(t, 0, func() { _, _, _ = frame.Parse(tc.in, &lim) })
		}
	})
	_, _ = sinkF, sinkH
}

func TestAllocsHeaderBlockWalk(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	block, err := frame.AppendHeaderBlock(nil, kubeExecHeader(), &lim)
	require.NoError(t, err)
	requireAllocs(t, 0, func() { _ = frame.CheckHeaderBlock(block, &lim) })
	var it frame.BlockIterator
	n := 0
	requireAllocs(t, 0, func() {
		n = 0
		for it.Reset(block, &lim); it.Next(); {
			name, value := it.Field()
			n += len(name) + len(value)
		}
	})
	require.Positive(t, n)
	bad := cat(block, rawField("x", "\r"))
	requireAllocs(t, 0, func() { _ = frame.CheckHeaderBlock(bad, &lim) })
}

// TestAllocsDecodeHeaderBlock pins the floor that DecodeHeaderBlock's doc
// comment promises: 2 per block (1 when every value is empty, 0 for an empty
// block), +1 key per run of an unknown name, nothing for adjacent repeats,
// and the value slice's growth when adding to a name h already holds or one
// repeated apart. h is cleared between runs, so its map never grows.
func TestAllocsDecodeHeaderBlock(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	enc := func(h http.Header) []byte {
		b, err := frame.AppendHeaderBlock(nil, h, &lim)
		require.NoError(t, err)
		return b
	}
	preValues := make([]string, 1, 1) // full: adding to it must grow
	cases := []struct {
		name  string
		block []byte
		pre   bool // h holds Streamtype before decoding
		want  float64
	}{
		{"empty block", nil, false, 0},
		{"known names", enc(http.Header{"Streamtype": {"stdout"}, "Port": {"8080"}, "Requestid": {"0"}}), false, 2},
		{"kube exec header", enc(kubeExecHeader()), false, 2},
		{"known names, adjacent repeats", enc(http.Header{"X-Stream-Protocol-Version": {"a", "b", "c", "d"}}), false, 2},
		{"only empty values", enc(http.Header{"Streamtype": {""}, "Port": {""}}), false, 1},
		{"one unknown name", enc(http.Header{"Streamtype": {"stdout"}, "X-Foo": {"1"}}), false, 3},
		{"one unknown name, adjacent repeats", enc(http.Header{"X-Foo": {"1", "2", "3"}}), false, 3},
		{"two unknown names", enc(http.Header{"X-Foo": {"1"}, "X-Bar": {"2", "3"}, "Port": {"1"}}), false, 4},
		{"known name repeated apart", cat(rawField("streamtype", "a"), rawField("port", "1"), rawField("streamtype", "b")), false, 3},
		{"onto a name h holds", enc(http.Header{"Streamtype": {"stdout"}, "Port": {"1"}}), true, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			want := http.Header{}
			if tc.pre {
				want["Streamtype"] = []string{""}
			}
			require.NoError(t, frame.DecodeHeaderBlock(tc.block, &lim, want))
			requireAllocs(t, tc.want, func() {
				clear(h)
				if tc.pre {
					h["Streamtype"] = preValues
				}
				if err := frame.DecodeHeaderBlock(tc.block, &lim, h); err != nil {
					panic(err)
				}
			})
			require.Equal(t, want, h)
		})
	}
}
