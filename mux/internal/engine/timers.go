package engine

import (
	"errors"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// sendPing queues our PING; only one is outstanding at a time.
func (e *Engine) sendPing(now time.Duration) {
	if e.pingOut || e.err != nil {
		return
	}
	e.pingOutTokens = min(float64(pingOutBurst), e.pingOutTokens+float64(now-e.pingOutAt)*pingRate/float64(time.Second))
	e.pingOutAt = now
	if e.pingOutTokens < 1 {
		if !e.pingWanted {
			e.pingWanted = true // nextTimer: when the next token comes
			e.wake()
		}
		return
	}
	e.pingOutTokens--
	e.pingWanted = false
	e.pingOut = true
	e.pingOpaque++
	e.pingSentAt = now
	e.lastPingAt = now
	e.urgent.push(ctrl{typ: frame.TypePing, arg: e.pingOpaque})
	e.wake()
}

// Tick runs the timers at now.
func (e *Engine) Tick(now time.Duration) {
	if e.rs.suspended {
		e.resumeTick(now) // the only timer of a suspended session
		return
	}
	if e.err != nil {
		if e.flushing && e.closeBy > 0 && now >= e.closeBy {
			e.flushing = false // the peer did not take the rest in time
		}
		return
	}
	cfg := e.cfg
	if !e.gotSettings && now >= e.settingsBy {
		e.fail(frame.SettingsTimeout, errors.New("no SETTINGS from the peer"))
		return
	}
	if cfg.KeepAliveInterval > 0 {
		if cfg.KeepAliveTimeout > 0 && now-e.lastRecv >= cfg.KeepAliveTimeout {
			err := errors.New("nothing received for the keepalive timeout")
			if !e.connTimedOut(err) {
				e.fail(frame.KeepaliveTimeout, err)
			}
			return
		}
		if now-e.lastSend >= cfg.KeepAliveInterval {
			e.sendPing(now)
		}
	}
	if e.idleTimeout > 0 && now-e.lastActivity >= e.idleTimeout {
		e.fail(frame.IdleTimeout, errors.New("idle timeout"))
		return
	}
	if cfg.ReadTimeout > 0 && e.partial && now-e.partialSince >= cfg.ReadTimeout {
		err := errors.New("a partly received message stalled for the read timeout")
		if !e.connTimedOut(err) {
			e.fail(frame.KeepaliveTimeout, err)
		}
		return
	}
	if cfg.StallTimeout > 0 && e.stalled && now-e.stallSince >= cfg.StallTimeout {
		e.fail(frame.StallTimeout, errors.New("the peer kept the session window at zero with data queued"))
		return
	}
	if e.drainBy > 0 && now >= e.drainBy {
		e.die(&SessionError{Code: frame.NoError, Err: errors.New("GOAWAY drain timed out")}, false, false)
		return
	}
	if e.gotSettings && now-e.lastPingAt >= rttPingInterval && now-e.lastActivity < rttPingInterval {
		e.sendPing(now) // RTT sample for window auto-tuning while data flows
	}
	if e.gotSettings && e.shared.Shared(now) && now-e.lastPingAt >= shareProbe {
		e.sendPing(now) // minimum-RTT sample for the shared-connection cap
	}
	if e.pingWanted {
		e.sendPing(now) // one asked for while the bucket was empty
	}
}

// pingReadyAt returns the earliest time at or after now at which the
// outbound PING bucket holds a token.
func (e *Engine) pingReadyAt(now time.Duration) time.Duration {
	tokens := e.pingOutTokens + float64(now-e.pingOutAt)*pingRate/float64(time.Second)
	if tokens >= 1 {
		return now
	}
	return now + time.Duration((1-tokens)*float64(time.Second)/pingRate) + 1
}

// NextTimer returns when Tick must run next (relative to now), or -1.
func (e *Engine) NextTimer(now time.Duration) time.Duration {
	if e.rs.suspended {
		if e.rs.resumeBy == 0 {
			return -1
		}
		return max(e.rs.resumeBy-now, 0)
	}
	if e.err != nil {
		if e.flushing && e.closeBy > 0 {
			return max(e.closeBy-now, 0)
		}
		return -1
	}
	next := time.Duration(-1)
	at := func(t time.Duration) {
		if next < 0 || t < next {
			next = t
		}
	}
	if !e.gotSettings {
		at(e.settingsBy)
	}
	if e.cfg.KeepAliveInterval > 0 {
		if e.cfg.KeepAliveTimeout > 0 {
			at(e.lastRecv + e.cfg.KeepAliveTimeout)
		}
		if !e.pingOut {
			at(max(e.lastSend+e.cfg.KeepAliveInterval, e.pingReadyAt(now)))
		}
	}
	if e.pingWanted && !e.pingOut {
		at(e.pingReadyAt(now))
	}
	if e.idleTimeout > 0 {
		at(e.lastActivity + e.idleTimeout)
	}
	if e.drainBy > 0 {
		at(e.drainBy)
	}
	if rt := e.cfg.ReadTimeout; rt > 0 {
		if e.partial {
			at(e.partialSince + rt)
		} else {
			at(now + rt) // a message that starts meanwhile is checked then
		}
	}
	if e.cfg.StallTimeout > 0 && e.stalled {
		at(e.stallSince + e.cfg.StallTimeout)
	}
	if next < 0 {
		return -1
	}
	return max(next-now, 0)
}

// SetPartial records the driver's account of the message being received:
// partly received since since (ok), or none in progress. The read timeout
// runs on it.
func (e *Engine) SetPartial(since time.Duration, ok bool) {
	e.partial, e.partialSince = ok, since
}

// checkStall notes whether data is held back by a zero session window
// alone, and since when (the stall timeout runs on it).
func (e *Engine) checkStall(now time.Duration) {
	blocked := e.err == nil && e.gotSettings && e.txQueued > 0 && e.sessSend.avail() <= 0
	switch {
	case blocked && !e.stalled:
		e.stalled, e.stallSince = true, now
	case !blocked:
		e.stalled = false
	}
}
