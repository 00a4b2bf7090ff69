package httpstream_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
)

// serveHello is the exec side of a streaming server: it negotiates the
// remote command protocol, upgrades with up, writes "hello over NAME" on
// stdout and ends the command with success.
func serveHello(w http.ResponseWriter, r *http.Request, up httpstream.ResponseUpgrader, name string) {
	if _, err := httpstream.Handshake(r, w, []string{"v4.channel.k8s.io"}); err != nil {
		return
	}
	streams := make(chan httpstream.Stream, 4)
	conn := up.UpgradeResponse(w, r, func(s httpstream.Stream, replySent <-chan struct{}) error {
		streams <- s
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	var stdout, errStream httpstream.Stream
	for stdout == nil || errStream == nil {
		s := <-streams
		switch s.Headers().Get("streamType") {
		case "stdout":
			stdout = s
		case "error":
			errStream = s
		}
	}
	fmt.Fprintf(stdout, "hello over %s\n", name)
	stdout.Close()
	errStream.Close() // no error: exit code 0
}

// exec runs a command through ex and prints its stdout.
func exec(ex remotecommand.Executor) {
	var out strings.Builder
	if err := ex.Stream(remotecommand.StreamOptions{Stdout: &out}); err != nil {
		fmt.Println("exec:", err)
		return
	}
	fmt.Print(out.String())
}

// The fallback executor: wsmux first, SPDY when the server answers the
// wsmux upgrade with 403 (what a server that does not speak wsmux, such as
// an unmodified apiserver or kubelet, does). Both pairs come from the same
// *rest.Config, one call each.
func Example_fallbackExecutor() {
	// A server that knows only SPDY and refuses other upgrades with 403.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "SPDY/3.1") {
			http.Error(w, "upgrade not supported", http.StatusForbidden)
			return
		}
		serveHello(w, r, spdy.NewResponseUpgrader(), "SPDY")
	}))
	defer srv.Close()

	config := &rest.Config{Host: srv.URL} // from a kubeconfig in real life
	u, _ := url.Parse(srv.URL + "/api/v1/namespaces/default/pods/web-0/exec?command=hello&stdout=true")

	wrt, wup, err := wsmuxhttpstream.RoundTripperFor(config)
	if err != nil {
		panic(err)
	}
	primary, err := remotecommand.NewSPDYExecutorForTransports(wrt, wup, "POST", u)
	if err != nil {
		panic(err)
	}
	srt, sup, err := clientspdy.RoundTripperFor(config)
	if err != nil {
		panic(err)
	}
	secondary, err := remotecommand.NewSPDYExecutorForTransports(srt, sup, "POST", u)
	if err != nil {
		panic(err)
	}
	ex, err := remotecommand.NewFallbackExecutor(primary, secondary, func(err error) bool {
		// The wsmux round tripper reports a refused upgrade as client-go's
		// UpgradeFailureError, its Cause an *UpgradeError with the status.
		var ufe *httpstream.UpgradeFailureError
		var ue *wsmuxhttpstream.UpgradeError
		return errors.As(err, &ufe) && errors.As(ufe.Cause, &ue) && ue.StatusCode == http.StatusForbidden
	})
	if err != nil {
		panic(err)
	}
	exec(ex)
	// Output: hello over SPDY
}

// A server that accepts both protocols on the same path: wsmux upgrades
// (WebSocket, subprotocol wsmux.v1) go to the wsmux upgrader, the rest to
// the SPDY one; the handler code after the upgrade is the same. Today's
// SPDY clients and wsmux clients then share one endpoint.
func Example_serverForBoth() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wsmuxhttpstream.IsWsmuxRequest(r) {
			serveHello(w, r, wsmuxhttpstream.NewResponseUpgrader(), "wsmux")
			return
		}
		serveHello(w, r, spdy.NewResponseUpgrader(), "SPDY")
	}))
	defer srv.Close()

	config := &rest.Config{Host: srv.URL}
	u, _ := url.Parse(srv.URL + "/api/v1/namespaces/default/pods/web-0/exec?command=hello&stdout=true")
	for _, roundTripperFor := range []func(*rest.Config) (http.RoundTripper, clientspdy.Upgrader, error){
		func(c *rest.Config) (http.RoundTripper, clientspdy.Upgrader, error) {
			return wsmuxhttpstream.RoundTripperFor(c)
		},
		clientspdy.RoundTripperFor,
	} {
		rt, up, err := roundTripperFor(config)
		if err != nil {
			panic(err)
		}
		ex, err := remotecommand.NewSPDYExecutorForTransports(rt, up, "POST", u)
		if err != nil {
			panic(err)
		}
		exec(ex)
	}
	// Output:
	// hello over wsmux
	// hello over SPDY
}
