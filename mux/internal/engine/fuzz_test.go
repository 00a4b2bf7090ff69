package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// FuzzCore feeds arbitrary messages to the session state machine (server
// role) after a valid SETTINGS, interleaved with batches, reads and timer
// ticks. It checks that nothing panics and that a failed session reports a
// *SessionError and sends nothing but its GOAWAY.
//
// Input: a sequence of [op byte][len byte][len bytes]; op%4: 0 feed the
// bytes as a message, 1 lay out a batch, 2 read from every stream, 3 tick.
func FuzzCore(f *testing.F) {
	seed := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, 0, byte(len(p)))
			b = append(b, p...)
			b = append(b, 1, 0)
		}
		return b
	}
	f.Add(seed(synFrame(nil, 1), appendOK(frame.AppendData(nil, 1, true, []byte("hi")))))
	f.Add(seed(frame.AppendPing(nil, false, 1), appendOK(frame.AppendWindowUpdate(nil, 0, 100))))
	f.Add(seed(appendOK(frame.AppendRSTStream(synFrame(nil, 1), 1, frame.Cancel, "x"))))
	f.Add(seed(appendOK(frame.AppendGoAway(nil, 0, frame.NoError, ""))))
	f.Fuzz(fuzzCore)
}

// fuzzCore is FuzzCore's body.
func fuzzCore(t *testing.T, data []byte) {
	if len(data) > 64<<10 {
		return
	}
	watchdog := time.AfterFunc(5*time.Second, func() { panic("FuzzCore: input hangs") })
	defer watchdog.Stop()
	cfg := testConfig()
	c := New(cfg, false, nil, 0)
	var s frame.Settings
	if err := c.Feed(frame.AppendSettings(nil, &s), 0); err != nil {
		t.Fatal(err)
	}
	now := time.Duration(0)
	buf := make([]byte, 64<<10)
	for len(data) >= 2 {
		op, n := data[0]%4, int(data[1])
		data = data[2:]
		n = min(n, len(data))
		arg := data[:n]
		data = data[n:]
		now += time.Millisecond
		switch op {
		case 0:
			if len(arg) > 0 {
				_ = c.Feed(arg, now)
			}
		case 1:
			dead, failed := c.err != nil, c.failed
			out := c.appendBatch(nil, now)
			if len(out) == 0 {
				break
			}
			var it frame.Iterator
			it.Reset(out, frame.DefaultLimits())
			for it.Next() {
				// A session that failed sends its GOAWAY and nothing
				// else (DATA only while a Close flushes); one that ended
				// gracefully may still send the resets it queued last.
				typ := it.Frame().Type
				if dead && typ != frame.TypeGoAway && typ != frame.TypeData && (failed || typ != frame.TypeRSTStream) {
					t.Fatalf("%v sent after the session ended", typ)
				}
			}
			if it.Err() != nil {
				t.Fatalf("we sent an invalid frame: %v", it.Err())
			}
		case 2:
			for _, st := range c.streams {
				if k := st.rxq.read(buf); k > 0 {
					c.consumed(st, k, now)
				}
			}
		case 3:
			if len(arg) > 0 {
				now += time.Duration(arg[0]) * time.Second
			}
			c.Tick(now)
		}
	}
	// INTERNAL_ERROR is a local failure; a peer's GOAWAY may carry
	// any code (regress-peer-goaway-internal-error).
	if c.err != nil && c.err.Code == frame.InternalError && !c.err.Remote {
		t.Fatalf("internal error: %v", c.err)
	}
}

// TestFuzzCoreRegressions replays, by name, the inputs FuzzCore failed on
// (also files under testdata/fuzz/FuzzCore/, replayed as seeds).
func TestFuzzCoreRegressions(t *testing.T) {
	for _, name := range []string{
		// Harness bug: the peer's GOAWAY(INTERNAL_ERROR) ended the drain
		// with a remote INTERNAL_ERROR, which the harness took for a
		// local failure.
		"regress-peer-goaway-internal-error",
		// A session whose GOAWAY drain ended kept its whole urgent queue
		// (to send the resets it queued last), a PING included; it now
		// keeps only the RST_STREAMs.
		"regress-ping-after-drain-end",
	} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzCore", name))
			if err != nil {
				t.Fatal(err)
			}
			_, arg, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
			v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(arg, "[]byte("), ")"))
			if err != nil {
				t.Fatal(err)
			}
			fuzzCore(t, []byte(v))
		})
	}
}

// FuzzSession and FuzzSessionPair, the fuzz targets of whole sessions
// (hostile peer; two sessions driven by a random program), live in package
// fuzz (fuzz/session.go, fuzz/pair.go): they use only the public API, and
// package fuzz cannot be imported from here (it imports mux). FuzzCore stays
// here because it drives the unexported core.

// TestFirstBatchCountsPreface is the regression test of a FuzzSessionPair
// find (fuzz/testdata/fuzz/FuzzSessionPair/regress-first-batch-over-peer-max-message):
// the writer lays out our SETTINGS and then the first batch in one message,
// and the batch limit (the peer's MaxMessageSize) did not count the
// SETTINGS, so a peer announcing 64 KiB got a 65,562-byte first message
// and closed the connection with 1009 when DATA was already queued.
func TestFirstBatchCountsPreface(t *testing.T) {
	cfg := testConfig()
	c := New(cfg, true, nil, 0)
	var s frame.Settings
	if err := s.Set(frame.SettingMaxMessageSize, 64<<10); err != nil {
		t.Fatal(err)
	}
	if err := c.Feed(frame.AppendSettings(nil, &s), 0); err != nil {
		t.Fatal(err)
	}
	st := c.Open(nil, 0)
	data := make([]byte, 200<<10)
	st.txq.write(data)
	c.txQueued += len(data)
	c.link(st)
	b := c.appendBatch(c.appendSettings(nil), 0)
	if len(b) > 64<<10 {
		t.Fatalf("first message of %d bytes, the peer accepts %d", len(b), 64<<10)
	}
	if got := frames(t, b); len(got) < 3 || got[0].Type != frame.TypeSettings {
		t.Fatalf("first message: %d frames", len(got))
	}
}
