package frame_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/fuzz/framefuzz"
)

// The native fuzz targets; the harness bodies live in package
// fuzz/framefuzz, which imports only frame (so these tests do not build
// mux), shared with go-fuzz (fuzz/gofuzz_frame.go). Seeds:
// testdata/fuzz/<Target>/.
//
//	go test -run='^$' -fuzz='^FuzzDecodeFrame$' -fuzztime=60s ./frame/

func FuzzDecodeFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := framefuzz.DecodeFrame(data); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzDecodeMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := framefuzz.DecodeMessage(data); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzHeaderBlock(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := framefuzz.HeaderBlock(data); err != nil {
			t.Fatal(err)
		}
	})
}

// seed is a named hand-picked corpus entry; names start with "valid-" or
// "malformed-".
type seed struct {
	name string
	data []byte
}

func seedCorpora(t testing.TB) map[string][]seed {
	lim := frame.DefaultBlockLimits()
	must := func(b []byte, err error) []byte {
		t.Helper()
		require.NoError(t, err)
		return b
	}
	execBlock := must(frame.AppendHeaderBlock(nil, kubeExecHeader(), &lim))
	pfBlock := must(frame.AppendHeaderBlock(nil, http.Header{"Streamtype": {"data"}, "Port": {"8080"}, "Requestid": {"0"}}, &lim))
	msg, _ := testMessage(t)
	var burst []byte
	for i := range 4 {
		burst = must(frame.AppendData(burst, 1, i == 3, bytes.Repeat([]byte{byte('a' + i)}, 100)))
	}
	settings := settingsOf(t, uint32(frame.SettingMaxDataPayload), 16<<10, uint32(frame.SettingMaxHeaderBytes), 8<<10,
		uint32(frame.SettingInitialStreamWindow), 256<<10, uint32(frame.SettingInitialSessionWindow), 1<<20,
		uint32(frame.SettingInitialMaxStreams), 100, uint32(frame.SettingMaxMessageSize), 1<<20)

	return map[string][]seed{
		"FuzzDecodeFrame": {
			{"valid-data", must(frame.AppendData(nil, 1, false, []byte("hello")))},
			{"valid-data-empty-fin", must(frame.AppendData(nil, 3, true, nil))},
			{"valid-data-trailing-bytes", cat(must(frame.AppendData(nil, 1, false, []byte("x"))), []byte{0xff, 0xff})},
			{"valid-headers", must(frame.AppendHeadersBlock(nil, 1, frame.FlagSYN, execBlock))},
			{"valid-headers-ack-fin", must(frame.AppendHeadersBlock(nil, 2, frame.FlagACK|frame.FlagFIN, pfBlock))},
			{"valid-window-update", must(frame.AppendWindowUpdate(nil, 0, frame.MaxDelta))},
			{"valid-rst-stream", must(frame.AppendRSTStream(nil, 5, frame.Cancel, "context canceled"))},
			{"valid-stop-sending", must(frame.AppendStopSending(nil, 5, 0x1001))},
			{"valid-ping-ack", frame.AppendPing(nil, true, 0xdeadbeef)},
			{"valid-goaway", must(frame.AppendGoAway(nil, 7, frame.EnhanceYourCalm, "too many resets"))},
			{"valid-settings", frame.AppendSettings(nil, settings)},
			{"valid-max-streams", must(frame.AppendMaxStreams(nil, 200))},
			{"malformed-short-header", rawHeader(0, 0, 1, 1, 0)[:7]},
			{"malformed-short-payload", cat(rawHeader(0, 0, 10, 1, 0), []byte("abc"))},
			{"malformed-unknown-type", rawHeader(9, 0, 0, 1, 0)},
			{"malformed-unknown-flags", rawHeader(5, 1, 0, 0, 0)},
			{"malformed-syn-ack", rawFrame(1, 6, 1, 0, nil)},
			{"malformed-zero-delta", rawFrame(2, 0, 1, 0, nil)},
			{"malformed-reason-utf8", rawFrame(3, 0, 1, 8, []byte("\xc3\x28"))},
			{"malformed-settings-duplicate", rawFrame(7, 0, 0, 0, cat(rawSetting(1, 4096), rawSetting(1, 4096)))},
			{"malformed-headers-bad-name", rawFrame(1, 2, 1, 0, rawField("Stream Type", "x"))},
		},
		"FuzzDecodeMessage": {
			{"valid-every-type", msg},
			{"valid-data-burst", burst},
			{"valid-single-ping", frame.AppendPing(nil, false, 1)},
			{"malformed-empty", []byte{}},
			{"malformed-truncated-tail", msg[:len(msg)-1]},
			{"malformed-bad-second-frame", cat(burst[:112], rawFrame(8, 0, 0, 1<<31, nil))},
			{"malformed-trailing-garbage", cat(burst, []byte{1, 2, 3})},
		},
		"FuzzHeaderBlock": {
			{"valid-kube-exec", execBlock},
			{"valid-portforward", pfBlock},
			{"valid-empty", []byte{}},
			{"valid-unsorted-repeats", cat(rawField("b", "1"), rawField("a", "2"), rawField("b", "3"), rawField("c-d", ""))},
			{"malformed-uppercase", rawField("Streamtype", "stdout")},
			{"malformed-crlf-value", rawField("x", "a\r\nb")},
			{"malformed-truncated", execBlock[:len(execBlock)-3]},
			{"malformed-empty-name", []byte{0, 0, 0}},
			{"malformed-value-length", []byte{1, 'a', 0xff, 0xff}},
			{"malformed-too-many", fields(65)},
		},
	}
}

// corpusFile is the native corpus encoding of one []byte argument.
func corpusFile(data []byte) string {
	return fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
}

// readCorpusFile decodes a native corpus file holding one []byte.
func readCorpusFile(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := strings.TrimSpace(string(b))
	head, arg, ok := strings.Cut(s, "\n")
	require.True(t, ok, path)
	require.Equal(t, "go test fuzz v1", head, path)
	require.True(t, strings.HasPrefix(arg, "[]byte(") && strings.HasSuffix(arg, ")"), path)
	v, err := strconv.Unquote(arg[len("[]byte(") : len(arg)-1])
	require.NoError(t, err, path)
	return []byte(v)
}

// TestSeedCorpus checks (and with -update writes) the hand-picked seeds:
// valid ones decode, malformed ones do not, every frame type has a valid
// frame, and every file under testdata/fuzz is a readable corpus entry that
// passes its harness.
func TestSeedCorpus(t *testing.T) {
	corpora := seedCorpora(t)
	if *update {
		for target, seeds := range corpora {
			dir := filepath.Join("testdata", "fuzz", target)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			for _, s := range seeds {
				require.NoError(t, os.WriteFile(filepath.Join(dir, s.name), []byte(corpusFile(s.data)), 0o644))
			}
		}
	}
	lim := frame.DefaultLimits()
	types := map[frame.Type]bool{}
	harness := map[string]func([]byte) error{
		"FuzzDecodeFrame":   framefuzz.DecodeFrame,
		"FuzzDecodeMessage": framefuzz.DecodeMessage,
		"FuzzHeaderBlock":   framefuzz.HeaderBlock,
	}
	for target, seeds := range corpora {
		for _, s := range seeds {
			path := filepath.Join("testdata", "fuzz", target, s.name)
			require.Equal(t, s.data, readCorpusFile(t, path), "%s is stale: run with -update", path)
			var err error
			switch target {
			case "FuzzDecodeFrame":
				var f frame.Frame
				f, _, err = frame.Parse(s.data, &lim)
				if err == nil {
					types[f.Type] = true
				}
			case "FuzzDecodeMessage":
				var it frame.Iterator
				it.Reset(s.data, lim)
				for it.Next() {
				}
				err = it.Err()
			case "FuzzHeaderBlock":
				err = frame.CheckHeaderBlock(s.data, &lim.Block)
			}
			if strings.HasPrefix(s.name, "valid-") {
				require.NoError(t, err, path)
			} else {
				require.Error(t, err, path)
			}
		}
	}
	for ty := frame.TypeData; ty <= frame.TypeMaxStreams; ty++ {
		require.True(t, types[ty], "no valid %v seed", ty)
	}
	// Every file there, seeds and regressions alike, passes its harness.
	for target, h := range harness {
		files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
		require.NoError(t, err)
		require.NotEmpty(t, files)
		for _, path := range files {
			require.NoError(t, h(readCorpusFile(t, path)), path)
		}
	}
}
