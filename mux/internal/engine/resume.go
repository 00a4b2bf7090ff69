package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/pool"
)

// Session resumption (docs/spec/wsmux-resume-v1.md), off unless
// Config.Resume is set and the peer's SETTINGS set RESUME too. Each side
// counts the message bytes it received and acknowledges them (RECEIVED),
// and keeps every message it sent, byte for byte, until the peer's count
// covers it. When the connection drops the driver calls Suspend; once it
// redialled and learned the peer's count it calls Resume, and appendBatch
// sends the retained messages from that count on, whole and in order,
// before anything new. Replaying frames as laid out is what keeps
// half-closes, resets and credit exact without per-stream bookkeeping.

// ackEvery is how many received bytes may stay unacknowledged before a
// RECEIVED goes out without waiting for a WINDOW_UPDATE (spec section 3).
const ackEvery = 64 << 10

// Errors of resumption.
var (
	// ErrResumeTimeout ends a suspended session not resumed in time.
	ErrResumeTimeout = errors.New("wsmux: the session was not resumed within the resume timeout")
	// ErrResumeCount: a peer's received count that cannot be honoured.
	ErrResumeCount = errors.New("wsmux: the peer's received count is not one this session can resume from")
	// ErrNotSuspended: Resume on a session that is not suspended.
	ErrNotSuspended = errors.New("wsmux: the session is not suspended")
	// ErrRetainedOverBound ends a session whose peer leaves more of our
	// bytes unacknowledged than its windows allow (ENHANCE_YOUR_CALM).
	ErrRetainedOverBound = errors.New("wsmux: the peer does not acknowledge what it received (RECEIVED): retained bytes over the bound")
	// ErrResumeNotNegotiated wraps the error of a connection lost before
	// the peer's SETTINGS arrived: resumption was offered but not yet in
	// effect, so the session ends instead of being suspended.
	ErrResumeNotNegotiated = errors.New("wsmux: the connection was lost before the peer's SETTINGS arrived, so resumption was not in effect and the session cannot be resumed; open a new session")
)

// retainedMsg is a message we sent, n bytes at offset off of our sent
// bytes; its bytes are in the retention chunks.
type retainedMsg struct {
	off uint64
	n   int
}

// resumeState is the engine's resumption state.
type resumeState struct {
	on       bool // we retain and count: we set RESUME and the peer did not say no
	inEffect bool // both SETTINGS set RESUME

	recv    uint64 // bytes of the peer's messages received and processed
	ackSent uint64 // the count the peer knows we received (RECEIVED, handshake)
	sent    uint64 // bytes of our messages laid out
	acked   uint64 // the count the peer acknowledged

	msgs     []retainedMsg // retained messages, oldest first, from head
	head     int
	retained int // bytes in msgs[head:]
	// The retained bytes, back to back in pooled chunks of
	// pool.ChunkSize (the receive chunks' pool): chunk i holds offsets
	// from chunkOff+i*ChunkSize on, all full but the last. No copy of a
	// batch allocates once the pool is warm, and memory is what is
	// retained plus less than one chunk.
	chunks   []*[]byte
	chunkOff uint64

	suspended   bool
	suspendedAt time.Duration
	resumedAt   time.Duration // the last Resume: a PING sent before it spans a suspension
	resumeBy    time.Duration // 0: no resume timeout
	replayOff   uint64        // next offset to replay while replayOff < replayEnd
	replayEnd   uint64        // what was sent when the session resumed
	prefaceOwed bool          // appendPreface came while suspended

	suspends, resumes uint64

	// connLost: a keepalive or read timeout found the connection dead
	// while resumption is in effect; the driver takes it (TakeConnLost).
	connLost    bool
	connLostErr error
}

// Resumable reports whether resumption is in effect, or may be: we set
// RESUME and the peer's SETTINGS have not said otherwise yet. Only
// ResumeInEffect sessions are suspended.
func (e *Engine) Resumable() bool { return e.rs.on }

// ResumeInEffect reports whether both endpoints' SETTINGS set RESUME.
func (e *Engine) ResumeInEffect() bool { return e.rs.inEffect }

// Suspended reports whether the session is suspended.
func (e *Engine) Suspended() bool { return e.rs.suspended }

// ReceivedCount returns the bytes of the peer's messages received and
// processed: what the client sends in its resume request, and the server
// in its answer.
func (e *Engine) ReceivedCount() uint64 { return e.rs.recv }

// RetainedBytes returns the bytes of sent messages kept for replay.
func (e *Engine) RetainedBytes() int { return e.rs.retained }

// ResumeCounts returns how many times the session was suspended and
// resumed.
func (e *Engine) ResumeCounts() (suspends, resumes uint64) { return e.rs.suspends, e.rs.resumes }

// Suspend records that the connection was lost: the session keeps its
// streams, sends nothing and runs no timer but the resume timeout until
// Resume. It reports false when the session cannot be suspended (it ended,
// or resumption is not in effect); the driver then ends it as before
// (LostBeforeResume when resumption was still to be negotiated).
//
// In effect means both SETTINGS set RESUME (spec sections 1 and 5), not
// only ours: before the peer's SETTINGS arrive it has agreed to nothing.
// A server that suspended then would hold a session, its streams and its
// application's resources (a gateway's upstream exec, the caller's session
// slot) for the resume timeout on behalf of a client that dropped after
// the 101, at no cost to that client.
func (e *Engine) Suspend(now time.Duration) bool {
	if !e.rs.inEffect || e.err != nil || e.wsClosedByPeer {
		return false
	}
	if e.rs.suspended {
		return true
	}
	e.rs.suspended = true
	e.rs.suspendedAt = now
	e.rs.resumeBy = 0
	if e.cfg.ResumeTimeout > 0 {
		e.rs.resumeBy = now + e.cfg.ResumeTimeout
	}
	e.rs.suspends++
	e.stats.Suspends.Add(1)
	// An outstanding PING stays out: it, or its answer, comes with a
	// replay (onPing takes no RTT sample from it).
	e.partial = false
	e.wake() // the timers changed
	return true
}

// Resume continues a suspended session on a new connection: peerReceived
// is the peer's received count from the resume handshake. The next
// batches replay every retained message from that count on, whole and in
// order, then new frames follow. A count the session cannot honour fails
// the session with PROTOCOL_ERROR and returns ErrResumeCount.
func (e *Engine) Resume(peerReceived uint64, now time.Duration) error {
	if !e.rs.suspended {
		return ErrNotSuspended
	}
	if e.err != nil && !e.flushing {
		return e.err
	}
	if !e.rs.validCount(peerReceived) {
		e.rs.suspended = false
		e.stats.ResumeFailures.Add(1)
		e.noGoAway = true
		e.fail(frame.ProtocolError, ErrResumeCount)
		return ErrResumeCount
	}
	e.rs.ackTo(peerReceived)
	e.rs.replayOff, e.rs.replayEnd = peerReceived, e.rs.sent
	// The handshake told the peer our count.
	e.rs.ackSent = e.rs.recv
	e.rs.suspended = false
	e.rs.resumedAt = now
	e.rs.resumes++
	e.stats.Resumes.Add(1)
	// The session's timers run again as if the suspension had not lasted.
	d := now - e.rs.suspendedAt
	// Nothing was received on the new connection yet: the keepalive
	// clock starts with it (a suspension the keepalive timeout caused
	// would otherwise expire again at once).
	e.lastRecv = now
	e.lastSend += d
	e.lastActivity += d
	e.lastPingAt += d
	e.settingsBy += d
	e.stallSince += d
	if e.drainBy > 0 {
		e.drainBy += d
	}
	if e.closeBy > 0 {
		e.closeBy += d
	}
	// A message first thing: the peer gets one at once on the new
	// connection (a server retires the resume's token at the first one).
	// That is the replay, if there is one, and a PING, for an RTT sample
	// of the new path, unless one is still out: a PING per resume would
	// pile up in the replays of a connection that keeps dropping, and
	// reach the peer at once, past its PING budget.
	if !e.pingOut || !e.rs.replaying() {
		// Without a replay, the PING out reached the peer: its answer,
		// if it still comes, is then useless.
		e.pingOut = false
		e.sendPing(now)
	}
	e.wake()
	return nil
}

// validCount reports whether n, a peer's count of our bytes, is one we can
// resume from: not below what it acknowledged, not above what we sent, and
// at the start of a retained message (or the end of all).
func (rs *resumeState) validCount(n uint64) bool {
	if n < rs.acked || n > rs.sent {
		return false
	}
	if n == rs.sent {
		return true
	}
	for _, m := range rs.msgs[rs.head:] {
		if m.off == n {
			return true
		}
		if m.off > n {
			break
		}
	}
	return false
}

// ackTo drops the retained messages the peer's count n covers.
func (rs *resumeState) ackTo(n uint64) {
	rs.acked = n
	for rs.head < len(rs.msgs) {
		m := &rs.msgs[rs.head]
		if m.off+uint64(m.n) > n {
			break
		}
		rs.retained -= m.n
		rs.head++
	}
	// Chunks wholly below the oldest retained byte go back to the pool.
	first := rs.sent
	if rs.head < len(rs.msgs) {
		first = rs.msgs[rs.head].off
	}
	k := 0
	for k < len(rs.chunks) && rs.chunkOff+pool.ChunkSize <= first {
		pool.PutChunk(rs.chunks[k])
		rs.chunks[k] = nil
		rs.chunkOff += pool.ChunkSize
		k++
	}
	if k > 0 {
		n := copy(rs.chunks, rs.chunks[k:])
		clear(rs.chunks[n:])
		rs.chunks = rs.chunks[:n]
	}
	if rs.head == len(rs.msgs) {
		rs.msgs, rs.head = rs.msgs[:0], 0
	} else if rs.head > 64 && rs.head > len(rs.msgs)/2 {
		k := copy(rs.msgs, rs.msgs[rs.head:])
		clear(rs.msgs[k:])
		rs.msgs, rs.head = rs.msgs[:k], 0
	}
}

// retain keeps a copy of the message just laid out: b[start:] with the
// spliced segments (their At offsets are into b) in their places.
func (rs *resumeState) retain(b []byte, start int, segs []pool.Segment) {
	n := len(b) - start
	for _, sg := range segs {
		n += len(sg.Data)
	}
	if len(rs.chunks) == 0 {
		rs.chunkOff = rs.sent
	}
	rs.msgs = append(rs.msgs, retainedMsg{off: rs.sent, n: n})
	rs.retained += n
	rs.sent += uint64(n)
	prev := start
	for _, sg := range segs {
		rs.keep(b[prev:sg.At])
		rs.keep(sg.Data)
		prev = sg.At
	}
	rs.keep(b[prev:])
}

// keep appends p to the retention chunks.
func (rs *resumeState) keep(p []byte) {
	for len(p) > 0 {
		var c *[]byte
		if k := len(rs.chunks); k > 0 && len(*rs.chunks[k-1]) < pool.ChunkSize {
			c = rs.chunks[k-1]
		} else {
			c = pool.GetChunk()
			rs.chunks = append(rs.chunks, c)
		}
		n := min(len(p), pool.ChunkSize-len(*c))
		*c = append(*c, p[:n]...)
		p = p[n:]
	}
}

// appendRetained appends the n retained bytes at offset off.
func (rs *resumeState) appendRetained(dst []byte, off uint64, n int) []byte {
	rel := off - rs.chunkOff
	i, at := int(rel/pool.ChunkSize), int(rel%pool.ChunkSize)
	for n > 0 {
		c := *rs.chunks[i]
		k := min(n, len(c)-at)
		dst = append(dst, c[at:at+k]...)
		n -= k
		i, at = i+1, 0
	}
	return dst
}

// dropRetention ends retention: the peer does not resume.
func (rs *resumeState) dropRetention() {
	rs.on = false
	for _, c := range rs.chunks {
		pool.PutChunk(c)
	}
	rs.msgs, rs.head, rs.retained, rs.chunks = nil, 0, 0, nil
}

// replaying reports whether retained messages wait to be sent again.
func (rs *resumeState) replaying() bool { return !rs.suspended && rs.replayOff < rs.replayEnd }

// ackDue reports whether a RECEIVED must go out without waiting for a
// WINDOW_UPDATE.
func (rs *resumeState) ackDue() bool { return rs.inEffect && rs.recv-rs.ackSent >= ackEvery }

// appendReplay appends the next retained message to replay.
func (rs *resumeState) appendReplay(dst []byte) []byte {
	for _, m := range rs.msgs[rs.head:] {
		if m.off == rs.replayOff {
			rs.replayOff += uint64(m.n)
			return rs.appendRetained(dst, m.off, m.n)
		}
	}
	rs.replayOff = rs.replayEnd // cannot happen: Resume checked the count
	return dst
}

// appendReceived lays out RECEIVED ahead of the credit queue when it is
// due: the batch carries a WINDOW_UPDATE (or other credit), or ackEvery
// bytes are unacknowledged.
func (e *Engine) appendReceived(dst []byte) []byte {
	rs := &e.rs
	if !rs.inEffect || rs.recv == rs.ackSent || (e.credit.empty() && !rs.ackDue()) {
		return dst
	}
	rs.ackSent = rs.recv
	e.stats.FramesOut.Add(1)
	return frame.AppendReceived(dst, uint32(rs.recv))
}

// onReceived applies the peer's RECEIVED: the retained messages it covers
// are dropped. One at or below the count already known is ignored: a
// replay resends the RECEIVED frames of before the drop, and the resume
// handshake told us a newer count.
func (e *Engine) onReceived(f *frame.Frame) {
	rs := &e.rs
	d := int32(f.Arg - uint32(rs.acked))
	if d <= 0 {
		return
	}
	n := rs.acked + uint64(d)
	if n > rs.sent {
		e.fail(frame.ProtocolError, errors.New("RECEIVED acknowledges bytes never sent"))
		return
	}
	rs.ackTo(n)
	if rs.head < len(rs.msgs) && rs.msgs[rs.head].off != n {
		e.fail(frame.ProtocolError, errors.New("RECEIVED count not at a message boundary"))
	}
}

// countReceived adds a processed message to the received count.
func (e *Engine) countReceived(n int) {
	rs := &e.rs
	if !rs.on {
		return
	}
	rs.recv += uint64(n)
	if rs.ackDue() {
		e.wake()
	}
	e.checkRetained()
}

// RetainedLimit returns the most bytes the session retains before it
// ends with ENHANCE_YOUR_CALM (spec section 4). The spec's bound is the
// peer's session window plus 64 KiB plus a message; the peer's window
// grows by WINDOW_UPDATE past what its SETTINGS said, so the larger of
// that and this side's own MaxSessionWindow stands for it, and the whole
// is doubled: frame headers of small DATA frames, and a round trip of
// acknowledgements in flight.
func (e *Engine) RetainedLimit() int {
	w := max(int(e.peerSessWin), e.cfg.MaxSessionWindow)
	return 2 * (w + ackEvery + e.batchLimit())
}

// checkRetained ends the session when the peer lets more of our bytes go
// unacknowledged than its windows allow: a peer that returns credit but
// never sends RECEIVED would otherwise make retention grow without end.
// It runs at every message from the peer: credit comes only in messages,
// so retention passes the limit by at most one message's grant.
func (e *Engine) checkRetained() {
	if e.rs.inEffect && e.err == nil && e.rs.retained > e.RetainedLimit() {
		e.fail(frame.EnhanceYourCalm, ErrRetainedOverBound)
	}
}

// peerFeatures applies the peer's FEATURES setting.
func (e *Engine) peerFeatures(v uint32) {
	if !e.rs.on {
		return
	}
	if v&frame.FeatureResume == 0 {
		e.rs.dropRetention()
		return
	}
	e.rs.inEffect = true
	e.lim.Resume = true
}

// LostBeforeResume ends the session after its connection failed with err
// when resumption was offered but not yet in effect (the peer's SETTINGS
// had not arrived): as a lost connection ends a session without
// resumption, nothing sent, with an error that wraps both
// ErrResumeNotNegotiated and err, so that the application learns why the
// session did not survive the drop. It reports whether it ended the
// session; false when resumption is in effect or off, or the session had
// ended already.
func (e *Engine) LostBeforeResume(err error) bool {
	if !e.rs.on || e.rs.inEffect || e.err != nil {
		return false
	}
	e.rs.dropRetention()
	e.ReadFailed(fmt.Errorf("%w: %w", ErrResumeNotNegotiated, err))
	return true
}

// resumeTick runs the resume timeout of a suspended session.
func (e *Engine) resumeTick(now time.Duration) {
	if e.rs.resumeBy == 0 || now < e.rs.resumeBy {
		return
	}
	e.rs.suspended = false
	e.noGoAway = true
	e.stats.ResumeFailures.Add(1)
	if e.err != nil {
		e.flushing = false
		return
	}
	e.stats.CountError(frame.KeepaliveTimeout)
	e.die(&SessionError{Code: frame.KeepaliveTimeout, Err: ErrResumeTimeout}, false, false)
}

// connTimedOut is called by Tick when a keepalive or read timeout
// expires. With resumption in effect it is the connection that is dead
// (a path that drops packets without a reset: a NAT entry gone, a
// balancer that blackholes), not the session: it records that for the
// driver, which drops the connection and suspends (TakeConnLost), and
// reports true. Otherwise the session fails as without resumption.
func (e *Engine) connTimedOut(err error) bool {
	if !e.rs.inEffect {
		return false
	}
	e.rs.connLost, e.rs.connLostErr = true, err
	return true
}

// TakeConnLost reports, once, that a keepalive or read timeout found the
// connection dead while resumption is in effect, and the timeout's error:
// the driver drops the connection and suspends the session, or, when it
// cannot (no way to redial or be found), calls FailConnLost.
func (e *Engine) TakeConnLost() (bool, error) {
	v := e.rs.connLost
	e.rs.connLost = false
	return v, e.rs.connLostErr
}

// FailConnLost ends the session as the timeout would have without
// resumption (KEEPALIVE_TIMEOUT).
func (e *Engine) FailConnLost() {
	e.fail(frame.KeepaliveTimeout, e.rs.connLostErr)
}

// ValidResumeCount reports whether the peer's received count n is one the
// session can resume from (a server checks it before answering 101).
func (e *Engine) ValidResumeCount(n uint64) bool { return e.rs.validCount(n) }

// AbandonResume ends a suspended session that cannot resume (the server
// does not know it any more, or refused the caller): as a lost connection
// ends it without resumption, nothing sent.
func (e *Engine) AbandonResume(err error) {
	if !e.rs.suspended {
		return
	}
	e.rs.suspended = false
	e.noGoAway = true
	e.stats.ResumeFailures.Add(1)
	if e.err != nil {
		e.flushing = false
		return
	}
	// CONNECT_ERROR, not INTERNAL_ERROR: nothing failed here, the lost
	// connection could not be made again (the server refused, or answered
	// wrongly). Never sent: there is no connection to send it on.
	e.die(&SessionError{Code: frame.ConnectError, Remote: true, Err: err}, false, false)
}
