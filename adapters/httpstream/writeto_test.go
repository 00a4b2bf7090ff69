package httpstream_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// The adapter's streams keep mux.Stream's io.WriterTo, so io.Copy from one
// takes it; like Read, it ends without error where the peer half-closed or
// reset the stream (SPDY's semantics).
func TestStreamWriteTo(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reset bool
	}{{"half-close", false}, {"reset", true}} {
		t.Run(tt.name, func(t *testing.T) {
			accepted := make(chan k8shttpstream.Stream, 1)
			client, _ := wsmuxTCPFactory(t, func(s k8shttpstream.Stream, _ <-chan struct{}) error {
				accepted <- s
				return nil
			})
			defer client.Close()
			st, err := client.CreateStream(http.Header{"Streamtype": {"data"}})
			if err != nil {
				t.Fatal(err)
			}
			peer := <-accepted
			wt, ok := peer.(io.WriterTo)
			if !ok {
				t.Fatalf("%T does not implement io.WriterTo", peer)
			}
			data := bytes.Repeat([]byte("wsmux"), 200<<10)
			go func() {
				_, _ = st.Write(data)
				if tt.reset {
					_ = st.Reset()
					return
				}
				_ = st.Close()
			}()
			var got bytes.Buffer
			n, err := wt.WriteTo(&got)
			if err != nil {
				t.Fatalf("WriteTo: %v", err)
			}
			if n != int64(got.Len()) || (!tt.reset && !bytes.Equal(got.Bytes(), data)) {
				t.Fatalf("WriteTo moved %d bytes (%d written), want %d", n, got.Len(), len(data))
			}
		})
	}
}
