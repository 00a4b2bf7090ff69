package flow

import "time"

// SharedCap notices when several streams receive data over one connection
// at once and caps every stream's receive window meanwhile (Receiver.SetLimit).
// More credit than one bandwidth-delay product only queues a stream's bytes
// in the socket buffers ahead of the other streams' frames: head-of-line
// latency for them, no throughput for it.
//
// Streams share the connection once DATA for two different streams
// arrives within Gap of each other, and go on sharing it for Hold after
// the last such pair. The cap is the bandwidth-delay product of a Rate
// (bytes per second) path at the connection's minimum RTT, at least Floor.
// Set the four fields before use; the zero value never caps.
//
// SharedCap is not safe for concurrent use: the caller synchronises.
type SharedCap struct {
	Gap, Hold time.Duration
	Rate      float64 // bytes per second
	Floor     uint32

	lastID uint32        // the stream the last DATA was for...
	lastAt time.Duration // ...and when
	until  time.Duration // streams share the connection until then
}

// Note records DATA for stream id (non-zero) at now.
func (s *SharedCap) Note(id uint32, now time.Duration) {
	if s.lastID != id && s.lastID != 0 && now-s.lastAt < s.Gap {
		s.until = now + s.Hold
	}
	s.lastID, s.lastAt = id, now
}

// Shared reports whether streams share the connection at now.
func (s *SharedCap) Shared(now time.Duration) bool { return now < s.until }

// SessionLimit returns the session window's limit given the streams'
// limit (Limit's result): while streams share the connection, twice theirs,
// at least floor; else 0 (no limit). Without it the session window grows
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
	if !s.Shared(now) || minRTT <= 0 {
		return 0
	}
	return uint32(min(max(s.Rate*minRTT.Seconds(), float64(s.Floor)), MaxWindow))
}
