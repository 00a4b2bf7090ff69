package frame

import "encoding/binary"

// SettingID names one SETTINGS entry.
type SettingID uint16

// Setting ids. A decoder keeps unknown ids (so newer peers can add some) but
// rejects a known id whose value is out of range.
const (
	SettingMaxDataPayload       SettingID = 0x1 // largest DATA payload the sender accepts: 4096..65535
	SettingMaxHeaderBytes       SettingID = 0x2 // largest header block the sender accepts: 1024..65535
	SettingInitialStreamWindow  SettingID = 0x3 // receive window of each new stream: 0..2^31-1
	SettingInitialSessionWindow SettingID = 0x4 // receive window of the session: 0..2^31-1
	SettingInitialMaxStreams    SettingID = 0x5 // streams the peer may open before MAX_STREAMS: 0..2^31-1
	SettingMaxMessageSize       SettingID = 0x6 // largest WebSocket message the sender accepts: >= 65536
	SettingKeepAliveHintMS      SettingID = 0x7 // the sender's keepalive interval, informational
	SettingFeatures             SettingID = 0x8 // bitmap of optional features; unknown bits are ignored
)

// Bits of SettingFeatures.
const (
	// FeatureResume: session resumption (docs/spec/wsmux-resume-v1.md).
	FeatureResume uint32 = 0x1
)

// Setting is one SETTINGS entry.
type Setting struct {
	ID    SettingID
	Value uint32
}

// check reports whether a known setting's value is in range.
func (s Setting) check() error {
	ok := true
	switch s.ID {
	case SettingMaxDataPayload:
		ok = s.Value >= MinMaxDataPayload && s.Value <= MaxPayload
	case SettingMaxHeaderBytes:
		ok = s.Value >= 1024 && s.Value <= MaxPayload
	case SettingInitialStreamWindow, SettingInitialSessionWindow:
		ok = s.Value <= MaxDelta
	case SettingInitialMaxStreams:
		ok = s.Value <= MaxCredit
	case SettingMaxMessageSize:
		ok = s.Value >= 64<<10 && s.Value <= MaxDelta
	}
	if !ok {
		return ErrSettingsValue
	}
	return nil
}

// Settings is the fixed-capacity set of entries of one SETTINGS frame. The
// zero value is empty and ready to use; it never allocates.
type Settings struct {
	n    int
	list [MaxSettings]Setting
}

// Len returns the number of entries.
func (s *Settings) Len() int { return s.n }

// At returns entry i in frame order.
func (s *Settings) At(i int) Setting { return s.list[i] }

// Get returns the value of id and whether it is present.
func (s *Settings) Get(id SettingID) (uint32, bool) {
	for _, e := range s.list[:s.n] {
		if e.ID == id {
			return e.Value, true
		}
	}
	return 0, false
}

// Set adds id or replaces its value. It fails when the value is out of range
// or the set already holds MaxSettings other entries.
func (s *Settings) Set(id SettingID, v uint32) error {
	e := Setting{id, v}
	if err := e.check(); err != nil {
		return err
	}
	for i := range s.list[:s.n] {
		if s.list[i].ID == id {
			s.list[i].Value = v
			return nil
		}
	}
	if s.n == MaxSettings {
		return ErrSettingsLength
	}
	s.list[s.n] = e
	s.n++
	return nil
}

// ParseSettings decodes a SETTINGS payload into s, replacing its contents.
// On error s is left empty.
func ParseSettings(payload []byte, s *Settings) error {
	return s.parse(payload)
}

func (s *Settings) parse(p []byte) error {
	s.n = 0
	if len(p)%settingSize != 0 || len(p) > maxSettingsLen {
		return ErrSettingsLength
	}
	for ; len(p) > 0; p = p[settingSize:] {
		e := Setting{SettingID(binary.BigEndian.Uint16(p)), binary.BigEndian.Uint32(p[2:])}
		if err := e.check(); err != nil {
			s.n = 0
			return err
		}
		if _, dup := s.Get(e.ID); dup {
			s.n = 0
			return ErrSettingsDuplicate
		}
		s.list[s.n] = e
		s.n++
	}
	return nil
}

// AppendSettings appends a SETTINGS frame holding s's entries in order.
func AppendSettings(dst []byte, s *Settings) []byte {
	dst = AppendHeader(dst, Header{Type: TypeSettings, Length: uint16(s.n * settingSize)})
	for _, e := range s.list[:s.n] {
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.ID))
		dst = binary.BigEndian.AppendUint32(dst, e.Value)
	}
	return dst
}
