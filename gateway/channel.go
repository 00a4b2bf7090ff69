package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	constants "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/wsmux/wsmux/controller"
)

// The channel protocols of exec and attach over WebSocket before v5: the
// same framing (one channel byte, then the payload; base64 in text
// messages for the base64 variant) and the same status JSON on the error
// channel, but no CLOSE signal, so a client cannot end stdin alone.
const (
	v4Protocol       = "v4.channel.k8s.io"
	v4Base64Protocol = "v4.base64.channel.k8s.io"
)

// Channel numbers of the exec and attach channel protocols.
const (
	chanStdin = iota
	chanStdout
	chanStderr
	chanError
	chanResize
)

// channelIdleTimeout ends a v4 session that moved nothing either way for
// this long (the apiserver's and the kubelet's value).
const channelIdleTimeout = 4 * time.Hour

// statusWriteTimeout bounds the write of the final status to a client that
// stopped reading.
const statusWriteTimeout = 10 * time.Second

// isV4Request: a WebSocket exec/attach of a client that offers v4 only
// (client-go's WebSocket executor told to, kubectl before 1.30 with its
// WebSocket feature on, other libraries).
func isV4Request(r *http.Request) bool {
	return isWebSocketUpgrade(r) && (offersSubprotocol(r, v4Protocol) || offersSubprotocol(r, v4Base64Protocol))
}

// isChannelRequest: a WebSocket exec/attach the gateway translates (v5,
// else v4).
func isChannelRequest(r *http.Request) bool { return isV5Request(r) || isV4Request(r) }

// streamOptions reads which streams an exec or attach asks for from its
// query, as the apiserver does.
func streamOptions(r *http.Request) proxy.Options {
	q := r.URL.Query()
	flag := func(k string) bool { v, _ := strconv.ParseBool(q.Get(k)); return v }
	return proxy.Options{Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), Tty: flag("tty")}
}

// translateV4 serves a v4.channel.k8s.io (or its base64 variant) exec or
// attach: k8s.io/apiserver's StreamTranslatorHandler speaks v5 only, so
// the WebSocket side is Kubernetes' own wsstream.Conn configured for v4,
// and the cluster side client-go's SPDY executor dialled in-process into
// the gateway's bridge, as for v5. The executor's outcome goes back on the
// error channel as a metav1.Status (exit codes as NonZeroExitCode causes).
func (g *Gateway) translateV4(w http.ResponseWriter, r *http.Request, t controller.Target, rec *spliceRecord) {
	opts := streamOptions(r)
	channels := make([]wsstream.ChannelType, chanResize+1)
	channels[chanStdin] = channelType(opts.Stdin, wsstream.ReadChannel)
	channels[chanStdout] = channelType(opts.Stdout, wsstream.WriteChannel)
	channels[chanStderr] = channelType(opts.Stderr, wsstream.WriteChannel)
	channels[chanError] = wsstream.WriteChannel
	channels[chanResize] = wsstream.ReadChannel
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		v4Protocol:       {Binary: true, Channels: channels},
		v4Base64Protocol: {Binary: false, Channels: channels},
	})
	conn.SetIdleTimeout(channelIdleTimeout)
	_, streams, err := conn.Open(w, r) // answers the client itself on failure
	if err != nil {
		g.m.BadRequests.WithLabelValues("bad_upgrade").Inc()
		g.logFor(r).Warn("gateway: v4 WebSocket upgrade failed", "remote", r.RemoteAddr, "error", err)
		return
	}
	defer conn.Close()
	// An empty message on the first writable channel tells the client the
	// session is up (as the kubelet's own v4 server does).
	first := chanError
	switch {
	case opts.Stdout:
		first = chanStdout
	case opts.Stderr:
		first = chanStderr
	}
	if _, err := streams[first].Write(nil); err != nil {
		return
	}

	loc, tr := g.internalUpstream(r, t, rec)
	rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{UpgradeTransport: tr, PingPeriod: 5 * time.Second})
	if err == nil {
		var ex remotecommand.Executor
		ex, err = remotecommand.NewSPDYExecutorRejectRedirects(rt, clientspdy.NewUpgraderForStreaming(rt), http.MethodPost, loc)
		if err == nil {
			so := remotecommand.StreamOptions{Tty: opts.Tty}
			if opts.Stdin {
				so.Stdin = streams[chanStdin]
			}
			if opts.Stdout {
				so.Stdout = streams[chanStdout]
			}
			if opts.Stderr {
				so.Stderr = streams[chanStderr]
			}
			if opts.Tty {
				so.TerminalSizeQueue = newResizeQueue(r.Context(), streams[chanResize])
			}
			err = ex.StreamWithContext(r.Context(), so)
		}
	}
	conn.SetWriteDeadline(statusWriteTimeout)
	b, _ := json.Marshal(outcomeStatus(err))
	_, _ = streams[chanError].Write(b)
}

func channelType(on bool, t wsstream.ChannelType) wsstream.ChannelType {
	if on {
		return t
	}
	return wsstream.IgnoreChannel
}

// outcomeStatus is what the error channel carries for the executor's
// result: Success, the command's exit code, the cluster's own Status (a
// 403, a missing pod), or an internal error.
func outcomeStatus(err error) metav1.Status {
	if err == nil {
		return metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	}
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se.Status()
	}
	var ce exec.CodeExitError
	if errors.As(err, &ce) && ce.Exited() {
		return metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure,
			Reason:   constants.NonZeroExitCodeReason,
			Message:  fmt.Sprintf("command terminated with non-zero exit code: %v", ce),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: constants.ExitCodeCauseType, Message: fmt.Sprint(ce.ExitStatus())},
			}},
		}
	}
	return apierrors.NewInternalError(err).Status()
}

// resizeQueue feeds the terminal sizes the client sends on the resize
// channel (JSON objects, one after the other) to the executor.
type resizeQueue struct {
	ch chan remotecommand.TerminalSize
}

func newResizeQueue(ctx context.Context, r io.Reader) *resizeQueue {
	q := &resizeQueue{ch: make(chan remotecommand.TerminalSize)}
	go func() {
		defer close(q.ch)
		d := json.NewDecoder(r)
		for {
			var sz remotecommand.TerminalSize
			if d.Decode(&sz) != nil {
				return
			}
			select {
			case q.ch <- sz:
			case <-ctx.Done():
				return
			}
		}
	}()
	return q
}

// Next returns the next size, or nil once the client's channel ended.
func (q *resizeQueue) Next() *remotecommand.TerminalSize {
	sz, ok := <-q.ch
	if !ok {
		return nil
	}
	return &sz
}

// internalUpstream returns where and how an in-process SPDY client reaches
// the gateway's own bridge for r: a URL with r's path and query and a
// transport whose connections are served by dialInternal as r's caller.
func (g *Gateway) internalUpstream(r *http.Request, t controller.Target, rec *spliceRecord) (*url.URL, *http.Transport) {
	loc := &url.URL{Scheme: "http", Host: "wsmux-gateway.internal", Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	user := callerOf(r)
	return loc, &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return g.dialInternal(user, t.Subresource, rec), nil
	}}
}
