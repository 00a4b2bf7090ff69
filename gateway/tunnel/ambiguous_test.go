package tunnel

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/mux"
)

// TestAmbiguousAuthorization: a tunnel upgrade with two Authorization
// headers (or two values joined into one) is refused with 400, whichever
// of them is valid, and counted. Before, the first header won.
func TestAmbiguousAuthorization(t *testing.T) {
	e := startServer(t, echoServer(t))
	valid, other := "Bearer "+testToken, "Bearer someone-elses"
	for _, tc := range []struct {
		name   string
		values []string
	}{
		{"the valid one first", []string{valid, other}},
		{"the valid one second", []string{other, valid}},
		{"joined by a proxy", []string{valid + ", " + other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := (&mux.Dialer{Header: http.Header{"Authorization": tc.values}}).Dial(context.Background(), wsURL(t, e.hs.URL))
			if err == nil {
				s.Close()
				t.Fatal("upgraded")
			}
			var he *mux.HandshakeError
			if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest {
				t.Fatalf("%v, want a 400", err)
			}
		})
	}
	if v := ops.Value(e.srv.Metrics().BadRequests.WithLabelValues(auth.ReasonAmbiguous)); v != 3 {
		t.Errorf("wsmux_bad_requests_total{reason=%q} = %v, want 3", auth.ReasonAmbiguous, v)
	}
}
