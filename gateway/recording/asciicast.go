package recording

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// castHeader is an asciicast v2 header; wsmux holds the session's Meta.
type castHeader struct {
	Version   int               `json:"version"`
	Width     int               `json:"width"`
	Height    int               `json:"height"`
	Timestamp int64             `json:"timestamp"`
	Title     string            `json:"title,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Wsmux     *Meta             `json:"wsmux"`
}

// portForwardEnd is the last line of a port-forward's record.
type portForwardEnd struct {
	End      string   `json:"end"`
	Duration float64  `json:"duration_seconds"`
	Ports    []string `json:"ports"`
	ToPod    int64    `json:"bytes_to_pod"`
	FromPod  int64    `json:"bytes_from_pod"`
}

// Default terminal size of a header when the session sent none first.
const defaultWidth, defaultHeight = 80, 24

// encoder turns events into asciicast lines. Stream data is cut at reads,
// which may split a UTF-8 sequence: the tail of an incomplete one is
// carried into the stream's next event.
type encoder struct {
	meta    *Meta
	started bool // the header is out
	carry   map[byte][]byte
}

func newEncoder(m *Meta) *encoder { return &encoder{meta: m, carry: map[byte][]byte{}} }

func (e *encoder) writeHeader(buf []byte, w, h int) []byte {
	e.started = true
	if e.meta.Kind == "portforward" {
		b, _ := json.Marshal(struct {
			Wsmux *Meta `json:"wsmux"`
		}{e.meta})
		return append(append(buf, b...), '\n')
	}
	title := e.meta.Namespace + "/" + e.meta.Pod
	if len(e.meta.Command) > 0 {
		title += ": " + strings.Join(e.meta.Command, " ")
	}
	hd := castHeader{Version: 2, Width: w, Height: h, Timestamp: e.meta.Start.Unix(), Title: title, Wsmux: e.meta}
	if e.meta.TTY {
		hd.Env = map[string]string{"TERM": "xterm"}
	}
	b, _ := json.Marshal(hd)
	return append(append(buf, b...), '\n')
}

// header writes the header with the default size.
func (e *encoder) header(buf []byte) []byte { return e.writeHeader(buf, defaultWidth, defaultHeight) }

func parseSize(d []byte) (int, int, bool) {
	ws, hs, ok := strings.Cut(string(d), "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	return w, h, ok && err1 == nil && err2 == nil
}

func (e *encoder) event(buf []byte, ev event) []byte {
	if !e.started {
		// A terminal's first size, sent before anything else, is the
		// header's.
		if w, h, ok := parseSize(ev.data); ev.code == codeResize && ok {
			return e.writeHeader(buf, w, h)
		}
		buf = e.header(buf)
	}
	data := ev.data
	switch ev.code {
	case codeOutput, codeStderr, codeInput:
		if c := e.carry[ev.code]; len(c) > 0 {
			data = append(c, data...)
			e.carry[ev.code] = nil
		}
		data, e.carry[ev.code] = splitIncomplete(data)
		if len(data) == 0 {
			return buf
		}
	}
	return appendEvent(buf, ev.at, ev.code, data)
}

func appendEvent(buf []byte, at time.Duration, code byte, data []byte) []byte {
	buf = append(buf, '[')
	buf = strconv.AppendFloat(buf, at.Seconds(), 'f', 6, 64)
	buf = append(buf, ", \""...)
	buf = append(buf, code)
	buf = append(buf, "\", "...)
	buf = appendJSONString(buf, data)
	return append(buf, "]\n"...)
}

// end writes what ends the recording: a port-forward's record, or for a
// cast the bytes still carried and the exit status as a marker.
func (e *encoder) end(buf []byte, end *End, d time.Duration) []byte {
	if !e.started {
		buf = e.header(buf)
	}
	if end == nil {
		end = &End{Exit: "unknown"}
	}
	if e.meta.Kind == "portforward" {
		ports := end.Ports
		if ports == nil {
			ports = []string{}
		}
		b, _ := json.Marshal(portForwardEnd{End: e.meta.Start.Add(d).UTC().Format(time.RFC3339Nano), Duration: d.Seconds(), Ports: ports, ToPod: end.ToPod, FromPod: end.FromPod})
		return append(append(buf, b...), '\n')
	}
	for _, c := range []byte{codeOutput, codeStderr, codeInput} {
		if len(e.carry[c]) > 0 {
			buf = appendEvent(buf, d, c, e.carry[c])
			e.carry[c] = nil
		}
	}
	return appendEvent(buf, d, codeMarker, []byte("exit "+end.Exit))
}

// splitIncomplete splits off the start of a UTF-8 sequence that d ends
// in the middle of.
func splitIncomplete(d []byte) (whole, rest []byte) {
	for k := 1; k <= 3 && k <= len(d); k++ {
		b := d[len(d)-k]
		if b&0xC0 == 0x80 {
			continue // a continuation byte: look further back
		}
		if b >= 0xC0 && !utf8.FullRune(d[len(d)-k:]) {
			return d[:len(d)-k], append([]byte(nil), d[len(d)-k:]...)
		}
		break
	}
	return d, nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends d as a JSON string; invalid UTF-8 becomes
// U+FFFD, as encoding/json does, without its allocations.
func appendJSONString(buf, d []byte) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(d); {
		c := d[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, d[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(d[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, d[start:i]...)
			buf = append(buf, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, d[start:]...)
	return append(buf, '"')
}
