package fuzz

import (
	"testing"
	"time"
)

// FuzzSessionPairEventLoop: SessionPair in real time over loopback TCP with
// both sessions on the event-loop driver (see SessionPairEventLoop).
//
//	go test -run='^$' -fuzz='^FuzzSessionPairEventLoop$' ./fuzz/
func FuzzSessionPairEventLoop(f *testing.F) {
	for _, s := range pairSeeds() {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		watchdog := time.AfterFunc(time.Minute, func() { panic("FuzzSessionPairEventLoop: input hangs") })
		defer watchdog.Stop()
		if err := SessionPairEventLoop(data); err != nil {
			t.Fatal(err)
		}
	})
}
