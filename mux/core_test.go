package mux

import (
	"testing"
	"unsafe"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// TestStreamSize keeps an idle stream within its size class: IdleStreams
// (a target in docs/performance.md) promises at most 1 KiB of heap per idle stream, both ends
// counted, and a Stream of up to 416 bytes (a malloc size class) leaves
// room for its table entry. A new field that crosses the class shows here.
func TestStreamSize(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(Stream{}), uintptr(416))
}
