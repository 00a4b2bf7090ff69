package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/mux"
)

// TestAmbiguousAuthorization: a request with two Authorization headers
// (or two values joined into one by a proxy) is refused with 400 and a
// message saying to send one, whichever of them is valid, on the proxied
// paths (the pod's GET) as on the streaming ones (a wsmux exec), counted
// and logged; nothing reaches the cluster. Before, the first header won:
// a front proxy appending its own header was bypassed.
func TestAmbiguousAuthorization(t *testing.T) {
	g := startGateway(t, nil, nil)
	const podPath = "/api/v1/namespaces/default/pods/web-0"
	valid, other := "Bearer "+callerToken, "Bearer someone-elses"
	for _, tc := range []struct {
		name   string
		values []string
	}{
		{"the valid one first", []string{valid, other}},
		{"the valid one second", []string{other, valid}},
		{"twice the same", []string{valid, valid}},
		{"joined by a proxy", []string{valid + ", " + other}},
	} {
		t.Run("GET "+tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, g.srv.URL+podPath, nil)
			req.Header["Authorization"] = tc.values
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Authorization") || !strings.Contains(string(body), "exactly one") {
				t.Fatalf("%d %s, want 400 saying to send exactly one Authorization header", resp.StatusCode, body)
			}
		})
		t.Run("wsmux exec "+tc.name, func(t *testing.T) {
			d := &mux.Dialer{Header: http.Header{"Authorization": tc.values, "X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}}
			s, err := d.Dial(context.Background(), "ws"+strings.TrimPrefix(g.srv.URL, "http")+podPath+"/exec?command=cat&stdin=true&stdout=true")
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
	if v := ops.Value(g.g.Metrics().BadRequests.WithLabelValues(auth.ReasonAmbiguous)); v != 8 {
		t.Errorf("wsmux_bad_requests_total{reason=%q} = %v, want 8", auth.ReasonAmbiguous, v)
	}
	if n, _ := g.cl.Stats(); n != 0 {
		t.Errorf("the cluster saw %d upgrades", n)
	}
	http.DefaultClient.CloseIdleConnections()
}
