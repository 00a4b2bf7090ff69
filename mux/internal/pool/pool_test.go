package pool

import (
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"
	"github.com/wsmux/wsmux/internal/testkit/require"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

func TestChunk(t *testing.T) {
	tests := []struct {
		name   string
		fill   int
		regrow bool
	}{
		{name: "empty"},
		{name: "partial", fill: 100},
		{name: "full", fill: ChunkSize},
		{name: "grown past the chunk size is dropped", fill: ChunkSize, regrow: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := GetChunk()
			require.NotNil(t, b)
			require.Len(t, *b, 0)
			require.Equal(t, ChunkSize, cap(*b))
			*b = append(*b, make([]byte, tt.fill)...)
			if tt.regrow {
				*b = append(*b, 1)
				require.Greater(t, cap(*b), ChunkSize)
			}
			PutChunk(b)
			c := GetChunk()
			require.Len(t, *c, 0)
			require.Equal(t, ChunkSize, cap(*c))
			PutChunk(c)
		})
	}
}

func TestPutChunkNil(t *testing.T) {
	require.NotPanics(t, func() { PutChunk(nil) })
	require.NotPanics(t, func() { PutBatch(nil) })
}

func TestBatch(t *testing.T) {
	for _, n := range []int{0, 1, 1 << 10, 64 << 10} {
		b := GetBatch(n)
		require.Zero(t, len(*b))
		require.GreaterOrEqual(t, cap(*b), n)
		*b = append(*b, make([]byte, n)...)
		PutBatch(b)
		c := GetBatch(n)
		require.Zero(t, len(*c), "a pooled batch comes back empty")
		require.GreaterOrEqual(t, cap(*c), n)
		PutBatch(c)
	}
}

func TestZeroAllocs(t *testing.T) {
	// Warm up both pools.
	PutChunk(GetChunk())
	PutBatch(GetBatch(4096))

	allocs := testing.AllocsPerRun(1000, func() {
		c := GetChunk()
		*c = append(*c, "data"...)
		PutChunk(c)
	})
	require.Zero(t, allocs, "GetChunk/PutChunk")

	allocs = testing.AllocsPerRun(1000, func() {
		b := GetBatch(4096)
		*b = append(*b, "batch"...)
		PutBatch(b)
	})
	require.Zero(t, allocs, "GetBatch/PutBatch")
}

func BenchmarkChunk(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		c := GetChunk()
		*c = append(*c, 'x')
		PutChunk(c)
	}
}

func BenchmarkBatch(b *testing.B) {
	payload := make([]byte, 16<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		bb := GetBatch(len(payload))
		*bb = append(*bb, payload...)
		PutBatch(bb)
	}
}
