// Package httpstream is wsmux's drop-in replacement for the SPDY transport of
// Kubernetes streaming (k8s.io/streaming/pkg/httpstream/spdy and its
// deprecated copy k8s.io/apimachinery/pkg/util/httpstream/spdy): kubectl
// exec/attach/cp/port-forward, the apiserver proxy and the kubelet
// streaming server.
//
// It mirrors the SPDY package name for name, so changing one import path is
// the whole migration:
//
//	import spdy "github.com/wsmux/wsmux/adapters/httpstream"
//	// was: import spdy "k8s.io/apimachinery/pkg/util/httpstream/spdy"
//
//	rt, err := spdy.NewRoundTripper(tlsConfig)        // client
//	upgrader := spdy.NewResponseUpgrader()             // server
//
// The constructors without a suffix return k8s.io/apimachinery's httpstream
// types (what client-go's public API takes: *RoundTripper is a
// transport/spdy.Upgrader, so spdy.Negotiate, spdy.NewDialer,
// remotecommand.NewSPDYExecutorForTransports and portforward.New accept it
// unchanged). The ...ForStreaming variants, and RoundTripper.ForStreaming,
// return the k8s.io/streaming/pkg/httpstream types that in-tree code (the
// kubelet's k8s.io/cri-streaming, the apiserver) uses.
//
// On the wire it is one RFC 6455 WebSocket (subprotocol wsmux.v1, always a
// GET upgrade, so WebSocket-only proxies pass it) carrying WSMUX/1 streams
// with per-stream flow control; X-Stream-Protocol-Version negotiates the
// Kubernetes application protocol exactly as with SPDY. The semantics are
// those of the SPDY adapter (CreateStream waits for the peer's handler;
// a handler error rejects; replySent is closed once the acceptance is
// written; Close half-closes; Reset ends both directions; Connection.Close
// resets every stream; data written before a reset or close is delivered
// before EOF), with these improvements: a stream nobody reads never stalls
// the others, no 16 MiB write limit, CreateStream fails at once when the
// connection dies, SetIdleTimeout is not defeated by keepalive pings.
//
// Session resumption (docs/spec/wsmux-resume-v1.md) is an option on both
// sides: RoundTripperConfig.Resume on the client (client-go's executor and
// port-forward dialer take the round tripper unchanged), and a mux.Config
// with Resume and a ResumeRegistry given to NewResponseUpgraderWithConfig
// on the server. When both offer it, a dropped connection (a load balancer's
// timeout, a proxy restart) suspends the session instead of failing it: the
// round tripper redials the same URL with the same headers and a resume
// token for up to ResumeTimeout, and every stream goes on with nothing lost
// or repeated. OnResumeEvent reports each drop and resume (the adapter does
// not log). With a server that does not offer it, nothing changes. A
// resumable client dials through mux.Dialer (not net/http), and a resumable
// server upgrades GET requests only.
//
// RoundTripperFor builds the pair from a *rest.Config in one call (TLS,
// bearer tokens, exec plugins, proxies), as client-go's
// transport/spdy.RoundTripperFor does for SPDY. The package examples show
// client-go's fallback executor (wsmux first, SPDY when the server answers
// 403) and a server that accepts both protocols on one path.
//
// A server that does not speak wsmux (an unmodified kubelet answers 403)
// makes NewConnection return an *httpstream.UpgradeFailureError, so
// client-go's fallback executor and dialer drop back to SPDY. Package
// github.com/wsmux/wsmux/adapters/bridge translates between the two
// protocols for clusters that adopt wsmux one hop at a time.
//
// It imports mux, internal/wshandshake and Kubernetes'
// httpstream and rest packages; it must not import anything under cmd/, bench,
// or a test helper, and mux must never import it (scripts/check-layers.sh).
package httpstream
