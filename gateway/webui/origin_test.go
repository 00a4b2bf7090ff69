package webui

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
)

// pageOrigin adds the Origin header a browser sends for its page.
type pageOrigin struct {
	http.RoundTripper
	origin string
}

func (p pageOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Origin", p.origin)
	return p.RoundTripper.RoundTrip(r)
}

// TestTerminalOrigin: the terminal's own page (the gateway's origin, as
// the browser test's page is) reaches exec through Wrap; a page of
// another site is refused with 403, token or not. (TestBrowser runs the
// page itself in chromium.)
func TestTerminalOrigin(t *testing.T) {
	srv := uiServer(t, nil)
	u, _ := url.Parse(srv.URL + "/api/v1/namespaces/default/pods/shell/exec?command=cat&stdin=true&stdout=true")
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{srv.URL, true},
		{"http://evil.example", false},
		{strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), false},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			rt, err := wsmuxhttpstream.NewRoundTripper(nil)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := remotecommand.NewSPDYExecutorForTransports(transport.NewBearerAuthRoundTripper(browserToken, pageOrigin{rt, tc.origin}), rt, http.MethodPost, u)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("same origin"), Stdout: &out})
			switch {
			case tc.ok && (err != nil || out.String() != "same origin"):
				t.Fatalf("%q, %v", out.String(), err)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), "403")):
				t.Fatalf("%v, want a 403", err)
			}
		})
	}
}
