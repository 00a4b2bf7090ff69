// Package kubeclient is the client side of `wsmux exec` and `wsmux
// port-forward`: client-go's remotecommand and portforward machinery over
// wsmux's RoundTripper (adapters/httpstream), pointed at a wsmux gateway
// (or any server that speaks wsmux for the Kubernetes pod subresources).
//
// It imports the httpstream adapter and client-go; it must not import mux
// directly, the gateway's packages, testing or the test helpers.
package kubeclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
)

// Options say where the gateway is and how to authenticate.
type Options struct {
	// Server is the gateway's base URL (http, https, ws or wss).
	Server string
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// TLS configures https (CA, client certificate for mTLS).
	TLS *tls.Config
	// DialTimeout bounds connecting to the server (TCP and TLS); 0: none.
	DialTimeout time.Duration
	// ResumeTimeout > 0 offers session resumption: when the connection
	// drops, a server that supports it keeps the session for this long
	// while the client redials (docs/spec/wsmux-resume-v1.md). 0: off.
	ResumeTimeout time.Duration
	// OnResumeEvent receives the drops and resumes (to log them).
	OnResumeEvent func(wsmuxhttpstream.ResumeEvent)
}

// roundTrippers returns the HTTP round tripper (with the bearer token) and
// the upgrader that owns the connection it dials: one pair per connection.
func (o Options) roundTrippers() (http.RoundTripper, *wsmuxhttpstream.RoundTripper, error) {
	rt, err := wsmuxhttpstream.NewRoundTripperWithConfig(wsmuxhttpstream.RoundTripperConfig{TLS: o.TLS,
		Resume: o.ResumeTimeout > 0, ResumeTimeout: o.ResumeTimeout, OnResumeEvent: o.OnResumeEvent})
	if err != nil {
		return nil, nil, err
	}
	rt.Dialer = &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	var tr http.RoundTripper = rt
	if o.Token != "" {
		u, err := url.Parse(o.Server)
		if err != nil {
			return nil, nil, err
		}
		tr = &bearerForHost{token: o.Token, host: u.Host, rt: rt}
	}
	return &upgradeRT{rt: tr, d: o.DialTimeout}, rt, nil
}

// bearerForHost adds "Authorization: Bearer token" to requests for host
// only: a redirect elsewhere (a controller sending the client on to a
// gateway with a one-time ticket in the URL, docs/controller.md) must not
// carry the token there.
type bearerForHost struct {
	token, host string
	rt          http.RoundTripper
}

func (b *bearerForHost) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != b.host || req.Header.Get("Authorization") != "" {
		return b.rt.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(req)
}

// upgradeRT bounds a round trip until the server's answer (the 101 or an
// error status) by DialTimeout, so a server that accepts the connection
// and never answers fails in time (what follows the answer is not
// bounded), and it keeps the first round-trip error with its type:
// client-go formats it into a string (naming the POST it was asked for,
// though the upgrade goes out as a GET).
type upgradeRT struct {
	rt http.RoundTripper
	d  time.Duration

	mu  sync.Mutex
	err error
}

func (a *upgradeRT) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel() // the round tripper no longer watches ctx once it has the answer
	var timer *time.Timer
	if a.d > 0 {
		timer = time.AfterFunc(a.d, cancel)
	}
	resp, err := a.rt.RoundTrip(req.WithContext(ctx))
	if timer != nil && !timer.Stop() && err != nil {
		err = &TimeoutError{After: a.d, Err: err}
	}
	if err != nil {
		a.mu.Lock()
		if a.err == nil {
			a.err = err
		}
		a.mu.Unlock()
	}
	return resp, err
}

// firstErr returns the first round-trip error, or nil.
func (a *upgradeRT) firstErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// typed returns err, or, when the request itself failed, the round trip's
// own error (with its type, not client-go's string).
func typed(err error, tr http.RoundTripper) error {
	if u, ok := tr.(*upgradeRT); ok && err != nil {
		if first := u.firstErr(); first != nil {
			return first
		}
	}
	return err
}

// TimeoutError is a server that did not answer within Options.DialTimeout.
type TimeoutError struct {
	After time.Duration
	Err   error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("no answer from the server within %s: %v", e.After, e.Err)
}
func (e *TimeoutError) Unwrap() error { return e.Err }

// Timeout reports true (net.Error).
func (e *TimeoutError) Timeout() bool { return true }

// Temporary reports false (net.Error).
func (e *TimeoutError) Temporary() bool { return false }

// PodURL is the URL of a pod subresource on the server.
func (o Options) PodURL(namespace, pod, sub string, query url.Values) (*url.URL, error) {
	u, err := url.Parse(o.Server)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "http"
	case "https", "wss":
		u.Scheme = "https"
	default:
		return nil, fmt.Errorf("server URL %q: scheme must be http, https, ws or wss", o.Server)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server URL %q: no host", o.Server)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(pod) + "/" + sub
	u.RawQuery = query.Encode()
	return u, nil
}

// RequestLine names the request a client makes for a pod subresource as
// it goes on the wire: a WebSocket upgrade is always a GET (client-go's
// executor and dialer say POST, which the wsmux round tripper replaces).
func (o Options) RequestLine(namespace, pod, sub string) string {
	u, err := o.PodURL(namespace, pod, sub, nil)
	if err != nil {
		return "GET " + o.Server
	}
	return "GET " + u.String() + " (WebSocket upgrade)"
}

// ExecOptions describe a remote command.
type ExecOptions struct {
	Namespace, Pod, Container string
	Command                   []string
	Stdin                     io.Reader // nil: no stdin stream
	Stdout, Stderr            io.Writer
	TTY                       bool
	// Sizes feeds terminal sizes (TTY only); nil sends none.
	Sizes remotecommand.TerminalSizeQueue
}

// Exec runs a command in a container, streaming like kubectl exec. A
// command that exits non-zero returns a k8s.io/client-go/util/exec.ExitError
// with its status; a rejected upgrade returns an *AuthError (401/403) or
// the upgrade failure.
func Exec(ctx context.Context, o Options, e ExecOptions) error {
	if len(e.Command) == 0 {
		return errors.New("no command")
	}
	q := url.Values{"command": e.Command}
	if e.Container != "" {
		q.Set("container", e.Container)
	}
	if e.Stdin != nil {
		q.Set("stdin", "true")
	}
	if e.Stdout != nil {
		q.Set("stdout", "true")
	}
	if e.Stderr != nil && !e.TTY {
		q.Set("stderr", "true")
	}
	if e.TTY {
		q.Set("tty", "true")
	}
	u, err := o.PodURL(e.Namespace, e.Pod, "exec", q)
	if err != nil {
		return err
	}
	tr, up, err := o.roundTrippers()
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewSPDYExecutorForTransports(tr, up, http.MethodPost, u)
	if err != nil {
		return err
	}
	opts := remotecommand.StreamOptions{Stdin: e.Stdin, Stdout: e.Stdout, Tty: e.TTY}
	if !e.TTY {
		opts.Stderr = e.Stderr
	}
	if e.TTY && e.Sizes != nil {
		opts.TerminalSizeQueue = e.Sizes
	}
	return classify(typed(ex.StreamWithContext(ctx, opts), tr))
}

// PortForwardOptions describe a port-forward.
type PortForwardOptions struct {
	Namespace, Pod string
	// Addresses to listen on (default 127.0.0.1); Ports as kubectl takes
	// them: "LOCAL:REMOTE", "PORT" or ":REMOTE" (any free local port).
	Addresses []string
	Ports     []string
	Out, Err  io.Writer
	// Ready, when not nil, is closed once the listeners are up.
	Ready chan struct{}
}

// PortForwarder is a running port-forward.
type PortForwarder struct{ pf *portforward.PortForwarder }

// GetPorts returns the forwarded ports (after Ready).
func (p *PortForwarder) GetPorts() ([]portforward.ForwardedPort, error) { return p.pf.GetPorts() }

// PortForward forwards local ports to the pod until ctx ends or the
// connection is lost. It checks the credentials first (one upgrade, so
// a wrong token fails at once rather than on the first connection).
func PortForward(ctx context.Context, o Options, p PortForwardOptions, started func(*PortForwarder)) error {
	u, err := o.PodURL(p.Namespace, p.Pod, "portforward", nil)
	if err != nil {
		return err
	}
	tr, up, err := o.roundTrippers()
	if err != nil {
		return err
	}
	addrs := p.Addresses
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1"}
	}
	ready := p.Ready
	if ready == nil {
		ready = make(chan struct{})
	}
	dialer := &checkedDialer{inner: clientspdy.NewDialer(up, &http.Client{Transport: tr}, http.MethodPost, u)}
	stop := make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, addrs, p.Ports, stop, ready, p.Out, p.Err)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	select {
	case <-ready:
		if started != nil {
			started(&PortForwarder{pf})
		}
	case err := <-errc:
		return typed(dialer.check(err), tr)
	}
	select {
	case err := <-errc:
		return typed(dialer.check(err), tr)
	case <-ctx.Done():
		close(stop)
		return typed(dialer.check(<-errc), tr)
	}
}

// checkedDialer remembers the first dial failure (an *AuthError among
// them): client-go's portforward formats the dial error with %s, dropping
// its type.
type checkedDialer struct {
	inner   apihttpstream.Dialer
	mu      sync.Mutex
	dialErr error
}

func (d *checkedDialer) Dial(protocols ...string) (apihttpstream.Connection, string, error) {
	c, p, err := d.inner.Dial(protocols...)
	err = classify(err)
	if err != nil {
		d.mu.Lock()
		if d.dialErr == nil {
			d.dialErr = err
		}
		d.mu.Unlock()
	}
	return c, p, err
}

// check returns the remembered dial failure, or err.
func (d *checkedDialer) check(err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil && d.dialErr != nil {
		return d.dialErr
	}
	return classify(err)
}

// AuthError is a server's refusal of the caller's credentials (401).
type AuthError struct {
	StatusCode int
	Err        error
}

func (e *AuthError) Error() string { return e.Err.Error() }
func (e *AuthError) Unwrap() error { return e.Err }

// classify turns a 401 upgrade failure into an *AuthError. A 403 is not
// one: a server that does not speak wsmux answers 403 (DESIGN), and the
// gateway passes the cluster's RBAC refusals on as 403.
func classify(err error) error {
	if err == nil {
		return nil
	}
	// client-go wraps the round tripper's *UpgradeError in an
	// UpgradeFailureError (whose Cause does not unwrap).
	cause := err
	var ufe *apihttpstream.UpgradeFailureError
	if errors.As(err, &ufe) {
		cause = ufe.Cause
		err = &upgradeFailure{err: err, cause: cause}
	}
	var ue *wsmuxhttpstream.UpgradeError
	if errors.As(cause, &ue) && ue.StatusCode == http.StatusUnauthorized {
		return &AuthError{StatusCode: ue.StatusCode, Err: err}
	}
	return err
}

// upgradeFailure keeps client-go's UpgradeFailureError message and makes
// its Cause (the *wsmuxhttpstream.UpgradeError with the server's status)
// reachable with errors.As.
type upgradeFailure struct {
	err   error
	cause error
}

func (e *upgradeFailure) Error() string { return e.err.Error() }
func (e *upgradeFailure) Unwrap() []error {
	return []error{e.err, e.cause}
}
