package fuzz

import (
	"errors"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

type namedSeed struct {
	name string
	data []byte
}

// script builds FuzzSession inputs.
type script struct{ b []byte }

func newScript(flags, key byte) *script { return &script{b: []byte{flags, key}} }

func (s *script) op(op byte, args ...byte) *script {
	s.b = append(append(s.b, op), args...)
	return s
}

func (s *script) u16(v int) []byte { return []byte{byte(v >> 8), byte(v)} }

// msg sends frames as one message in parts fragments (1..4).
func (s *script) msg(parts int, frames []byte) *script {
	s.b = append(s.b, byte(opMessage|(parts-1)<<3))
	s.b = append(s.b, s.u16(len(frames))...)
	s.b = append(s.b, frames...)
	return s
}

func (s *script) wait(units byte, shift byte) *script { return s.op(opWait|shift<<3, units) }

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func settingsFrame(kv ...uint32) []byte {
	var st frame.Settings
	for i := 0; i+1 < len(kv); i += 2 {
		if err := st.Set(frame.SettingID(kv[i]), kv[i+1]); err != nil {
			panic(err)
		}
	}
	return frame.AppendSettings(nil, &st)
}

func synFrame(id uint32, h http.Header, fin bool) []byte {
	lim := frame.DefaultBlockLimits()
	fl := frame.FlagSYN
	if fin {
		fl |= frame.FlagFIN
	}
	return must(frame.AppendHeaders(nil, id, fl, h, &lim))
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// sessionSeeds are the hand-written FuzzSession seeds (recorded sessions
// are files under testdata/fuzz/FuzzSession/).
func sessionSeeds() []namedSeed {
	exec := http.Header{"Streamtype": {"stdout"}, "X-Stream-Protocol-Version": {"v5.channel.k8s.io"}}
	return []namedSeed{
		{"empty", nil},
		{"server-open-data-fin", newScript(2, 7).
			msg(1, cat(synFrame(1, exec, false), must(frame.AppendData(nil, 1, true, []byte("hi"))))).
			wait(10, 0).b},
		{"client-role-fragmented", newScript(3, 9).
			msg(3, cat(synFrame(2, exec, false), must(frame.AppendData(nil, 2, false, []byte("abc"))))).
			op(opOpen, 0, 200).wait(50, 0).
			msg(1, must(frame.AppendData(nil, 2, true, nil))).b},
		{"flood-past-window", newScript(2|1<<3|0x20, 1).
			msg(1, synFrame(3, nil, false)).
			op(opFrame|1<<3, 3, 0x03, 0xe8).op(opFrame|1<<3, 3, 0x03, 0xe8).op(opFlush).wait(10, 0).b},
		{"templates", newScript(2, 3).
			op(opFrame, 0, 2).op(opFrame|1<<3, 1, 0, 100).op(opFrame|2<<3, 0, 0, 0, 1, 0).
			op(opFrame|5<<3, 9).op(opFlush).
			op(opFrame|3<<3, 1, 8).op(opFrame|4<<3, 1, 8).op(opFrame|6<<3, 1, 0).op(opFlush).wait(20, 1).b},
		{"control-frames", newScript(2, 5).
			op(opControl, 4, 'p', 'i', 'n', 'g').op(opControl|1<<3, 0).wait(1, 0).
			op(opControl|2<<3, 2, 0x03, 0xe8).b},
		{"raw-text-frame", newScript(2, 0).op(opRaw, 7, 0x81, 0x81, 1, 2, 3, 4, 'x').b},
		{"handler-refuses", newScript(2|2<<3, 11).
			msg(1, cat(synFrame(1, nil, false), synFrame(3, http.Header{"X-Refuse": {"1"}}, false), synFrame(5, exec, true))).
			wait(10, 0).b},
		{"timers", newScript(2|3<<3, 13).msg(1, synFrame(1, nil, false)).wait(250, 3).b},
		{"no-settings-timeout", newScript(3<<3, 1).wait(100, 2).b},
		{"app-actions", newScript(2|0x20, 17).
			msg(1, cat(synFrame(1, nil, false), synFrame(3, nil, false), must(frame.AppendData(nil, 3, false, make([]byte, 5000))))).
			op(opOpen, 0x10, 0).wait(5, 0).op(opApp, 0).op(opApp|1<<3, 1).op(opApp|2<<3, 2).op(opApp|3<<3, 3).
			msg(1, must(frame.AppendWindowUpdate(nil, 0, 1<<20))).wait(5, 0).b},
		{"settings-small-windows", newScript(0, 2).
			msg(1, cat(settingsFrame(uint32(frame.SettingInitialStreamWindow), 10, uint32(frame.SettingInitialSessionWindow), 20,
				uint32(frame.SettingMaxDataPayload), 4096), synFrame(1, nil, false))).
			op(opOpen, 0x40, 0).wait(10, 0).
			msg(1, cat(must(frame.AppendWindowUpdate(nil, 2, 100)), must(frame.AppendWindowUpdate(nil, 0, 100)))).wait(10, 0).b},
		{"goaway-then-close", newScript(2, 4).
			msg(1, cat(synFrame(1, nil, false), must(frame.AppendGoAway(nil, 1, frame.NoError, "bye")))).
			op(opOpen, 0, 10).wait(5, 0).op(opControl|2<<3, 2, 0x03, 0xe8).b},
		{"client-unmasked-wrongly", newScript(2|4, 0).msg(1, synFrame(1, nil, false)).b},
	}
}

// pairSeeds are the hand-written FuzzSessionPair seeds.
func pairSeeds() []namedSeed {
	prog := func(hdr [4]byte, ops ...byte) []byte { return append(hdr[:], ops...) }
	w := func(stream, side byte, n int) []byte {
		return []byte{pairWrite | side<<3, stream, byte(n >> 8), byte(n)}
	}
	return []namedSeed{
		{"empty", nil},
		{"exec-like", prog([4]byte{0, 0, 0, 0},
			cat([]byte{pairOpen | 1<<4, pairOpen | 1<<4, pairOpen | 1<<4},
				w(0, 0, 100), w(1, 1, 5000), w(2, 1, 300), []byte{pairClose, 0},
				[]byte{pairMisc | 1<<4 | 1<<5, 0}, []byte{pairMisc}, w(1, 1, 70000&0xffff),
				[]byte{pairWait | 2<<3, 50})...)},
		{"portforward-like", prog([4]byte{1, 1, 0, 0},
			cat([]byte{pairOpen | 2<<4, pairOpen | 2<<4},
				w(0, 0, 3000), w(0, 1, 20000), w(1, 0, 60000), []byte{pairStall | 1<<3, 1},
				w(1, 0, 60000), []byte{pairWait, 200}, []byte{pairStall | 1<<3 | 1<<4, 1})...)},
		{"tiny-windows-resets", prog([4]byte{2 | 4 | 8, 2 | 4 | 8 | 1<<4, 0, 0},
			cat([]byte{pairOpen, pairOpen, pairOpen | 1<<3},
				w(0, 0, 1000), w(1, 1, 1000), []byte{pairReset, 0, 1}, []byte{pairCloseRead | 1<<3, 1},
				w(2, 1, 500), []byte{pairReset | 1<<3, 2, 2})...)},
		{"stream-limit", prog([4]byte{0x20, 0x20 | 0x40, 0, 0},
			cat([]byte{pairOpen, pairOpen, pairOpen, pairOpen | 1<<3}, w(0, 0, 10), []byte{pairClose, 0}, []byte{pairClose | 1<<3, 0},
				[]byte{pairWait | 3<<3, 100}, []byte{pairOpen})...)},
		{"big-windows", prog([4]byte{3, 3, 0, 0},
			cat([]byte{pairOpen, pairOpen | 1<<3}, w(0, 0, 65535), w(0, 0, 65535), w(1, 1, 65535), w(0, 1, 65535))...)},
	}
}

// TestSessionSeedsReachTheirPath checks that the hand-written FuzzSession
// seeds do what their names say (so the harness is not silently vacuous):
// the session ends with the expected code, and the streams were there.
func TestSessionSeedsReachTheirPath(t *testing.T) {
	want := map[string]struct {
		code    frame.ErrorCode
		remote  bool
		streams int // at least this many streams seen by the application
	}{
		"server-open-data-fin":    {frame.NoError, false, 1},
		"client-role-fragmented":  {frame.NoError, false, 2},
		"flood-past-window":       {frame.FlowControlError, false, 0},
		"raw-text-frame":          {frame.ProtocolError, false, 0},
		"handler-refuses":         {frame.NoError, false, 2},
		"timers":                  {frame.KeepaliveTimeout, false, 1},
		"no-settings-timeout":     {frame.SettingsTimeout, false, 0},
		"app-actions":             {frame.NoError, false, 3},
		"control-frames":          {frame.NoError, true, 0},
		"client-unmasked-wrongly": {frame.ProtocolError, false, 0},
	}
	for _, s := range sessionSeeds() {
		w, ok := want[s.name]
		if !ok {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, err := runHostile(s.data, Clock{})
				if err != nil {
					t.Fatal(err)
				}
				var se *mux.SessionError
				if !errors.As(h.sess.Err(), &se) || se.Code != w.code || se.Remote != w.remote {
					t.Fatalf("session ended with %v, want code %v remote %v", h.sess.Err(), w.code, w.remote)
				}
				if len(h.streams) < w.streams {
					t.Fatalf("%d streams, want at least %d", len(h.streams), w.streams)
				}
			})
		})
	}
}
