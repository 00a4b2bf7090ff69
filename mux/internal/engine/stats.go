package engine

import (
	"sync/atomic"

	"github.com/wsmux/wsmux/frame"
)

// Counters are a session's counters, updated atomically by the engine (and
// the driver's transport counters) and readable at any time without the
// driver's lock. Bytes are WebSocket message payload bytes.
type Counters struct {
	BytesIn, BytesOut, FramesIn, FramesOut, MessagesIn, MessagesOut atomic.Uint64
	StreamsOpened, StreamsAccepted, ResetsLocal, ResetsRemote       atomic.Uint64
	LeaderMessages                                                  atomic.Uint64
	Suspends, Resumes                                               atomic.Uint64 // resumption: connections lost and resumed
	ResumeFailures                                                  atomic.Uint64 // suspended sessions that ended without resuming
	errors                                                          [0x16]atomic.Uint64
	otherErrors                                                     atomic.Uint64
}

// CountError counts one session or stream error with code.
func (sc *Counters) CountError(code frame.ErrorCode) {
	if int(code) < len(sc.errors) {
		sc.errors[code].Add(1)
	} else {
		sc.otherErrors.Add(1)
	}
}

// Errors returns the error counts by code; codes beyond the known ones
// count under 0xFFFFFFFF.
func (sc *Counters) Errors() map[frame.ErrorCode]uint64 {
	m := map[frame.ErrorCode]uint64{}
	for i := range sc.errors {
		if v := sc.errors[i].Load(); v > 0 {
			m[frame.ErrorCode(i)] = v
		}
	}
	if v := sc.otherErrors.Load(); v > 0 {
		m[frame.ErrorCode(0xFFFFFFFF)] = v
	}
	return m
}
