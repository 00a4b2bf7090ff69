package fuzz

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/fuzz/wsref"
	"github.com/wsmux/wsmux/mux"
)

// The end of a Session run: the bound on live streams, closing the session
// and waiting for everything it ran, then the checks of the session's error,
// its streams, the memory it held and everything it wrote.

// checkLive checks the stream table's bound while the session runs.
func (h *hostile) checkLive() {
	h.mu.Lock()
	opened := h.opened
	h.mu.Unlock()
	maxStreams := h.cfg.MaxStreams
	if maxStreams == 0 {
		maxStreams = mux.DefaultConfig().MaxStreams
	}
	if n := h.sess.NumStreams(); n > maxStreams+opened {
		h.fail("%d live streams with MaxStreams %d and %d opened locally", n, maxStreams, opened)
	}
}

// finish ends the run: release the stalled readers, close the session, and
// check every property.
func (h *hostile) finish() error {
	h.sleep(time.Second)
	h.checkLive()
	close(h.release)
	h.sleep(100 * time.Millisecond)
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		_ = h.sess.Close()
		close(closed)
	}()
	limit := h.cfg.CloseTimeout + 5*time.Second
	select {
	case <-closed:
	case <-time.After(limit):
		return fmt.Errorf("Session.Close did not return within %v", limit)
	}
	if d := time.Since(start); !h.clk.RealTime && d > h.cfg.CloseTimeout+3*time.Second {
		return fmt.Errorf("Session.Close took %v with CloseTimeout %v", d, h.cfg.CloseTimeout)
	}
	select {
	case <-h.sess.Done():
	default:
		return errors.New("Close returned before Done closed")
	}
	apps := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(apps)
	}()
	select {
	case <-apps:
	case <-time.After(time.Minute):
		return errors.New("stream goroutines still blocked a minute after the session ended")
	}
	select {
	case <-h.wireDone:
	case <-time.After(time.Minute):
		return errors.New("the session did not close the connection")
	}
	if err := h.firstErr(); err != nil {
		return err
	}
	// The session's error.
	var se *mux.SessionError
	if err := h.sess.Err(); !errors.As(err, &se) {
		return fmt.Errorf("session ended with %T %v", err, err)
	}
	if !se.Remote && !definedCode(se.Code) {
		return fmt.Errorf("session ended with the undefined code %v", se.Code)
	}
	// Every stream has ended both ways.
	for _, st := range h.streams {
		if n, err := st.Write([]byte("x")); err == nil || n != 0 {
			return fmt.Errorf("stream %d: Write after the session ended: %d, %v", st.ID(), n, err)
		}
		if _, err := io.Copy(io.Discard, st); err != nil && !errors.Is(err, mux.ErrSessionClosed) && !isStreamEnd(err) {
			return fmt.Errorf("stream %d: Read after the session ended: %v", st.ID(), err)
		}
	}
	// Memory held for streams nobody read.
	win := h.cfg.InitialStreamWindow
	if win == 0 {
		win = mux.DefaultConfig().InitialStreamWindow
	}
	maxSess := h.cfg.MaxSessionWindow
	if maxSess == 0 {
		maxSess = mux.DefaultConfig().MaxSessionWindow
	}
	total := 0
	for id, n := range h.stalledN {
		if n > win {
			return fmt.Errorf("unread stream %d buffered %d bytes with a %d-byte window", id, n, win)
		}
		total += n
	}
	if total > maxSess {
		return fmt.Errorf("unread streams buffered %d bytes with a %d-byte maximum session window", total, maxSess)
	}
	return h.checkWire()
}

func isStreamEnd(err error) bool {
	var se *mux.StreamError
	return errors.As(err, &se) || errors.Is(err, mux.ErrStreamClosed) || errors.Is(err, mux.ErrTimeout)
}

// definedCode reports whether c is one of the protocol's error codes.
func definedCode(c frame.ErrorCode) bool {
	s := c.String()
	return len(s) < 8 || (s[:8] != "UNKNOWN_" && s[:8] != "APPLICAT")
}

// checkWire checks everything the session wrote.
func (h *hostile) checkWire() error {
	h.mu.Lock()
	wire, model := h.wire, h.model
	h.mu.Unlock()
	// The session masks exactly when it is the client.
	r := wsref.Read(wire, h.client, 1<<30)
	switch r.End.Err {
	case io.EOF, wsref.ErrClose:
	default:
		return fmt.Errorf("the session's WebSocket stream is invalid: %v %d %s", r.End.Err, r.End.Code, r.End.Why)
	}
	if r.End.Err == wsref.ErrClose && !validCloseCode(r.End.Code) {
		return fmt.Errorf("the session sent the close code %d", r.End.Code)
	}
	lim := frame.DefaultLimits()
	maxMsg := mux.DefaultConfig().MaxMessageSize
	if model.unknown {
		// Raw bytes may have carried the peer's SETTINGS: any limits.
		lim, maxMsg = looseLimits(), 1<<30
	} else if model.settings != nil {
		if v, ok := model.settings.Get(frame.SettingMaxDataPayload); ok {
			lim.MaxDataPayload = int(v)
		}
		if v, ok := model.settings.Get(frame.SettingMaxHeaderBytes); ok {
			lim.Block.MaxBytes = int(v)
		}
		if v, ok := model.settings.Get(frame.SettingMaxMessageSize); ok {
			maxMsg = int(v)
		}
	}
	first := true
	var lastSyn uint32
	sent := map[uint32]int64{}
	for i, m := range r.Messages {
		if len(m) > maxMsg {
			return fmt.Errorf("message %d of %d bytes over the peer's %d", i, len(m), maxMsg)
		}
		var it frame.Iterator
		it.Reset(m, lim)
		for it.Next() {
			f := it.Frame()
			if first != (f.Type == frame.TypeSettings) {
				return fmt.Errorf("message %d: %v where SETTINGS must be the first frame and only that", i, f.Type)
			}
			first = false
			switch f.Type {
			case frame.TypeGoAway:
				if !definedCode(f.Code()) {
					return fmt.Errorf("GOAWAY with the undefined code %v", f.Code())
				}
			case frame.TypeRSTStream, frame.TypeStopSending:
				if !definedCode(f.Code()) && !f.Code().IsApplication() {
					return fmt.Errorf("%v with the undefined code %v", f.Type, f.Code())
				}
			case frame.TypeHeaders:
				if f.Flags.Has(frame.FlagSYN) {
					if (f.StreamID&1 == 1) != h.client || f.StreamID <= lastSyn {
						return fmt.Errorf("SYN for stream %d after %d (client %v)", f.StreamID, lastSyn, h.client)
					}
					lastSyn = f.StreamID
				}
			case frame.TypeData:
				sent[f.StreamID] += int64(len(f.Payload))
				sent[0] += int64(len(f.Payload))
			}
		}
		if it.Err() != nil {
			return fmt.Errorf("message %d does not decode: %v", i, it.Err())
		}
	}
	if model.lost {
		return nil
	}
	for id, n := range sent {
		if c := model.credit(id); n > c {
			return fmt.Errorf("%d DATA bytes sent on stream %d with %d of credit", n, id, c)
		}
	}
	return nil
}

func validCloseCode(c uint16) bool {
	switch c {
	case 1000, 1001, 1002, 1003, 1005, 1007, 1008, 1009, 1010, 1011:
		return true
	}
	return c >= 3000 && c <= 4999
}
