package fuzz

import (
	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

// What the hostile peer announced: its SETTINGS, and the flow-control
// credit it granted that bounds the DATA checkWire accepts from the session.

// creditModel keeps the peer's SETTINGS (the limits the session's frames
// must keep) and adds up the credit the peer granted: initial windows from
// its SETTINGS and every WINDOW_UPDATE it sent. The credit is an upper bound
// of what the session may send (it counts frames the session may never have
// applied). The two are lost separately: the settings only when raw bytes
// went out before the peer's first frame.
type creditModel struct {
	settings *frame.Settings
	started  bool // the peer's first frame went out
	unknown  bool // raw bytes may have been the first frame: settings unknown
	lost     bool // credit no longer tracked
	grants   map[uint32]int64
}

func newCreditModel() *creditModel { return &creditModel{grants: map[uint32]int64{}} }

// loseCredit stops the credit check; the settings stay known.
func (m *creditModel) loseCredit() { m.lost = true }

// loseRaw is raw bytes going out: they may carry any frame, the first one
// included.
func (m *creditModel) loseRaw() {
	m.lost = true
	if !m.started {
		m.unknown = true
	}
}

func (m *creditModel) peerMessage(msg []byte) {
	if m.unknown {
		return
	}
	lim := looseLimits()
	var it frame.Iterator
	it.Reset(msg, lim)
	for it.Next() {
		f := it.Frame()
		if !m.started {
			m.started = true
			if f.Type == frame.TypeSettings {
				var s frame.Settings
				if frame.ParseSettings(f.Payload, &s) == nil {
					m.settings = &s
				}
			}
			continue
		}
		if f.Type == frame.TypeWindowUpdate {
			m.grants[f.StreamID] += int64(f.Arg)
		}
	}
}

func (m *creditModel) credit(id uint32) int64 {
	win := int64(mux.DefaultConfig().InitialStreamWindow)
	setting := frame.SettingInitialStreamWindow
	if id == 0 {
		win = int64(mux.DefaultConfig().InitialSessionWindow)
		setting = frame.SettingInitialSessionWindow
	}
	if m.settings != nil {
		if v, ok := m.settings.Get(setting); ok {
			win = int64(v)
		}
	}
	return win + m.grants[id]
}
