package mux

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wsmux/wsmux/frame"
)

func appendOK(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func synFrame(dst []byte, id uint32) []byte {
	return appendOK(frame.AppendHeadersBlock(dst, id, frame.FlagSYN, nil))
}

func dataFrames(dst []byte, id uint32, n int) []byte {
	chunk := make([]byte, frame.DefaultMaxDataPayload)
	for n > 0 {
		k := min(n, len(chunk))
		dst = appendOK(frame.AppendData(dst, id, false, chunk[:k]))
		n -= k
	}
	return dst
}

// TestPeerViolations: each protocol violation by a raw peer ends the
// session with the right code, and a GOAWAY carrying it goes out.
func TestPeerViolations(t *testing.T) {
	var empty frame.Settings
	settings := frame.AppendSettings(nil, &empty)
	tests := []struct {
		name   string
		cfg    *Config
		frames func() [][]byte // messages after our SETTINGS
		first  []byte          // replaces the SETTINGS message
		code   frame.ErrorCode
	}{
		{name: "first frame not SETTINGS", first: frame.AppendPing(nil, false, 1), code: frame.ProtocolError},
		{name: "second SETTINGS", frames: func() [][]byte { return [][]byte{settings} }, code: frame.ProtocolError},
		{name: "DATA on idle stream", frames: func() [][]byte {
			return [][]byte{dataFrames(nil, 2, 10)}
		}, code: frame.ProtocolError},
		{name: "SYN with our parity", frames: func() [][]byte { return [][]byte{synFrame(nil, 1)} }, code: frame.ProtocolError},
		{name: "stream id reused", frames: func() [][]byte {
			return [][]byte{synFrame(synFrame(nil, 4), 2)}
		}, code: frame.ProtocolError},
		{name: "beyond stream credit", cfg: &Config{MaxStreams: 1}, frames: func() [][]byte {
			return [][]byte{synFrame(synFrame(nil, 2), 4)}
		}, code: frame.StreamLimit},
		{name: "DATA past the stream window", frames: func() [][]byte {
			return [][]byte{dataFrames(synFrame(nil, 2), 2, DefaultInitialStreamWindow+1)}
		}, code: frame.FlowControlError},
		{name: "DATA past the session window", cfg: &Config{InitialStreamWindow: 1 << 20, InitialSessionWindow: 1 << 20}, frames: func() [][]byte {
			b := dataFrames(synFrame(nil, 2), 2, 512<<10)
			return [][]byte{b, dataFrames(synFrame(nil, 4), 4, 512<<10+1)}
		}, code: frame.FlowControlError},
		{name: "session window overflow", frames: func() [][]byte {
			return [][]byte{appendOK(frame.AppendWindowUpdate(nil, 0, frame.MaxDelta))}
		}, code: frame.FlowControlError},
		{name: "WINDOW_UPDATE on idle stream", frames: func() [][]byte {
			return [][]byte{appendOK(frame.AppendWindowUpdate(nil, 8, 1))}
		}, code: frame.ProtocolError},
		{name: "unknown frame type", frames: func() [][]byte {
			return [][]byte{frame.AppendHeader(nil, frame.Header{Type: 0x42})}
		}, code: frame.ProtocolError},
		{name: "header block too large", cfg: &Config{MaxHeaderBytes: 1024}, frames: func() [][]byte {
			block := make([]byte, 0, 2048)
			block = append(block, 1, 'a', 0x07, 0xD0)
			block = append(block, bytes.Repeat([]byte{'v'}, 2000)...)
			return [][]byte{appendOK(frame.AppendHeadersBlock(nil, 2, frame.FlagSYN, block))}
		}, code: frame.HeaderTooLarge},
		{name: "ping flood", frames: func() [][]byte {
			var b []byte
			for i := 0; i < 100; i++ {
				b = frame.AppendPing(b, false, uint32(i))
			}
			return [][]byte{b}
		}, code: frame.EnhanceYourCalm},
		{name: "truncated frame", frames: func() [][]byte {
			return [][]byte{frame.AppendPing(nil, false, 1)[:7]}
		}, code: frame.FrameSizeError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := net.Pipe()
			cs, err := Client(a, tt.cfg)
			require.NoError(t, err)
			defer cs.Close()
			peer := newRawPeer(t, b, false)
			goaway := make(chan frame.ErrorCode, 1)
			go peer.watch(goaway)
			first := settings
			if tt.first != nil {
				first = tt.first
			}
			go func() {
				if peer.send(first) != nil || tt.frames == nil {
					return
				}
				for _, m := range tt.frames() {
					if peer.send(m) != nil {
						return
					}
				}
			}()
			select {
			case <-cs.CloseChan():
			case <-time.After(10 * time.Second):
				t.Fatal("session did not end")
			}
			var se *SessionError
			require.ErrorAs(t, cs.Err(), &se)
			require.Equal(t, tt.code, se.Code, "%v", se)
			require.False(t, se.Remote)
			select {
			case code := <-goaway:
				require.Equal(t, tt.code, code)
			case <-time.After(10 * time.Second):
				t.Fatal("no GOAWAY")
			}
			require.NotZero(t, cs.Stats().Errors[tt.code])
		})
	}
}

// watch reads frames and reports the first GOAWAY's code, then drains.
func (p *rawPeer) watch(goaway chan<- frame.ErrorCode) {
	defer p.conn.Close()
	sent := false
	for {
		msg, err := p.ws.ReadMessage()
		if err != nil {
			return
		}
		var it frame.Iterator
		it.Reset(msg, frame.DefaultLimits())
		for it.Next() {
			if f := it.Frame(); f.Type == frame.TypeGoAway && !sent {
				goaway <- f.Code()
				sent = true
			}
		}
	}
}
