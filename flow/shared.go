package flow

import "time"

// SharedCap notices when several streams receive data over one connection
// at once and caps every stream's receive window meanwhile (Receiver.SetLimit).
// More credit than one bandwidth-delay product only queues a stream's bytes
// in the socket buffers ahead of the other streams' frames: head-of-line
// latency for them, no throughput for it.
//
// Streams share the connection once DATA for two different streams
// arrives within Gap of each other, at least one of the two a latency-bound
// stream's (Note's small: a keystroke, a request), and go on sharing it for
// Hold after the last such pair. Streams that all move bulk are not capped:
// waiting behind one another costs them nothing, and the cap would only
// hold each of them to one window per credit round trip
// (docs/performance-history.md, "Few bulk streams"); their bytes in flight
// are still bounded by the session window, which the caller holds to
// SessionLimit(SessionCap) while several streams receive (Mixed). The cap
// is the bandwidth-delay product of a Rate (bytes per second) path at the
// connection's minimum RTT, at least Floor. Set the four fields before
// use; the zero value never caps.
//
// SharedCap is not safe for concurrent use: the caller synchronises.
type SharedCap struct {
	Gap, Hold time.Duration
	Rate      float64 // bytes per second
	Floor     uint32

	lastID  uint32        // the stream the last DATA was for...
	lastAt  time.Duration // ...and when
	smallID uint32        // the stream the last small DATA was for...
	smallAt time.Duration // ...and when
	turnAt  time.Duration // when DATA last came for another stream than before
	until   time.Duration // streams share the connection until then
}

// Note records DATA for stream id (non-zero) at now. small says the stream
// looks latency-bound (the caller's judgement, from the sizes of its
// payloads); bulk DATA shares the connection only with a small stream's.
func (s *SharedCap) Note(id uint32, small bool, now time.Duration) {
	turn := s.lastID != 0 && s.lastID != id
	if turn {
		s.turnAt = now
	}
	if small && turn && now-s.lastAt < s.Gap || s.smallID != 0 && s.smallID != id && now-s.smallAt < s.Gap {
		s.until = now + s.Hold
	}
	s.lastID, s.lastAt = id, now
	if small {
		s.smallID, s.smallAt = id, now
	}
}

// Mixed reports whether DATA came for different streams in turn within
// the last d before now (any sizes): several streams are receiving.
func (s *SharedCap) Mixed(now, d time.Duration) bool {
	return s.turnAt != 0 && now-s.turnAt < d
}

// Shared reports whether streams share the connection at now.
func (s *SharedCap) Shared(now time.Duration) bool { return now < s.until }

// SessionLimit returns the session window's limit given the cap it is
// held to (SessionCap's result): twice that cap, at least floor; 0: no
// limit. Without it the session window grows
// with the smoothed RTT, which under a bulk load measures the sender's
// queues rather than the path (on loopback 5 ms against an 80 us minimum:
// a 64 MiB window), and every byte queued for it is one more cache miss
// for the copies that move it. The floor keeps enough in flight for the
// bursts in which many readers drain the connection at once.
func SessionLimit(streamLimit, floor uint32) uint32 {
	if streamLimit == 0 {
		return 0
	}
	return uint32(min(max(2*uint64(streamLimit), uint64(floor)), MaxWindow))
}

// Limit returns the window limit of every stream at now, given the
// connection's minimum RTT (0: not measured yet): the cap while streams
// share the connection, else 0 (no limit).
func (s *SharedCap) Limit(now, minRTT time.Duration) uint32 {
	if !s.Shared(now) {
		return 0
	}
	return s.Cap(minRTT)
}

// SessionCap returns the cap the session window is held to (through
// SessionLimit) at now: the streams' cap while they share the connection,
// and also while several streams receive in turn within the last d
// (Mixed). Bulk streams alone keep their stream windows, but not a session
// window grown to megabytes of cold queues. 0: no limit.
func (s *SharedCap) SessionCap(now, minRTT, d time.Duration) uint32 {
	if !s.Shared(now) && !s.Mixed(now, d) {
		return 0
	}
	return s.Cap(minRTT)
}

// Cap returns the cap itself, shared or not (0 while minRTT is unknown).
func (s *SharedCap) Cap(minRTT time.Duration) uint32 {
	if minRTT <= 0 {
		return 0
	}
	return uint32(min(max(s.Rate*minRTT.Seconds(), float64(s.Floor)), MaxWindow))
}
