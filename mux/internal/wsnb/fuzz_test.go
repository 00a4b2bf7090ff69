package wsnb

import (
	"testing"

	"github.com/gobwas/ws"
	"github.com/wsmux/wsmux/internal/testkit/require"
)

// FuzzParserChunking: any input gives the same messages, control frames
// and error whether it comes all at once, byte by byte or in chunks of a
// fuzzed size.
func FuzzParserChunking(f *testing.F) {
	f.Add(frames(f, true, frag(ws.OpBinary, true, "hello")), 3)
	f.Add(frames(f, true, frag(ws.OpBinary, false, "ab"), frag(ws.OpPing, true, "p"), frag(ws.OpContinuation, true, "cd")), 5)
	f.Add([]byte{0x82, 0xfe, 0x01, 0x00, 1, 2, 3, 4}, 2)
	f.Add([]byte{0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8}, 1)
	f.Fuzz(func(t *testing.T, in []byte, size int) {
		if len(in) > 1<<16 {
			return
		}
		size = 1 + (size&0xffff)%max(len(in), 1)
		want := run(in, false, 64<<10, len(in)+1)
		require.Equal(t, want, run(in, false, 64<<10, 1))
		require.Equal(t, want, run(in, false, 64<<10, size))
	})
}
