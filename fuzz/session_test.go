package fuzz

import (
	"testing"
	"testing/synctest"
	"time"
)

// FuzzSession: a hostile peer's script against a real session (see
// Session). Runs in a synctest bubble: fake time, and a deadlock or a
// goroutine left behind fails the input.
//
//	go test -run='^$' -fuzz='^FuzzSession$' ./fuzz/
func FuzzSession(f *testing.F) {
	for _, s := range sessionSeeds() {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runSession(t, data)
	})
}

func runSession(t *testing.T, data []byte) {
	watchdog := time.AfterFunc(time.Minute, func() { panic("FuzzSession: input hangs in real time") })
	defer watchdog.Stop()
	synctest.Test(t, func(t *testing.T) {
		if err := Session(data, Clock{}); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzSessionPair: two real sessions driven by a random program (see
// SessionPair), in a synctest bubble.
//
//	go test -run='^$' -fuzz='^FuzzSessionPair$' ./fuzz/
func FuzzSessionPair(f *testing.F) {
	for _, s := range pairSeeds() {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runPair(t, data)
	})
}

func runPair(t *testing.T, data []byte) {
	watchdog := time.AfterFunc(time.Minute, func() { panic("FuzzSessionPair: input hangs in real time") })
	defer watchdog.Stop()
	synctest.Test(t, func(t *testing.T) {
		if err := SessionPair(data, Clock{}); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzSessionPairTCP: SessionPair in real time over loopback TCP, where the
// sessions read with leaders and write spliced DATA (see SessionPairTCP).
// No synctest bubble: socket reads do not block durably, so fake time
// could not advance.
//
//	go test -run='^$' -fuzz='^FuzzSessionPairTCP$' ./fuzz/
func FuzzSessionPairTCP(f *testing.F) {
	for _, s := range pairSeeds() {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		watchdog := time.AfterFunc(time.Minute, func() { panic("FuzzSessionPairTCP: input hangs") })
		defer watchdog.Stop()
		if err := SessionPairTCP(data); err != nil {
			t.Fatal(err)
		}
	})
}
