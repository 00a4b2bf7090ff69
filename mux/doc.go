// Package mux is the wsmux stream multiplexer: many bidirectional,
// flow-controlled byte streams over one WebSocket connection (WSMUX/1,
// subprotocol "wsmux.v1").
//
// A server upgrades HTTP requests and accepts streams; a client dials and
// opens them:
//
//	// server
//	http.HandleFunc("/mux", func(w http.ResponseWriter, r *http.Request) {
//		sess, err := mux.Upgrade(w, r, nil)
//		if err != nil {
//			return // the client got an HTTP error
//		}
//		defer sess.Close()
//		for {
//			st, err := sess.AcceptStream(r.Context())
//			if err != nil {
//				return
//			}
//			go func() { io.Copy(st, st); st.Close() }() // echo, then half-close
//		}
//	})
//
//	// client
//	sess, err := mux.Dial(ctx, "ws://host/mux", nil)
//	st, err := sess.Open(ctx, http.Header{"Streamtype": {"data"}})
//	st.Write([]byte("hello"))
//	st.CloseWrite()
//	reply, err := io.ReadAll(st)
//
// A Session is a net.Listener (Accept) and a Stream is a net.Conn with its
// own deadlines. Stream.Close is a half-close (FIN): the peer reads EOF and
// may still write back; Stream.Reset aborts both directions with an error
// code. Data the peer sent before it reset a stream or closed the session is
// still delivered before the error or EOF.
//
// Flow control is per stream and per session, credit returned as the
// application reads, so a stream nobody reads never stalls the others.
// Writes block (honouring deadlines) when credit or send buffers run out.
// Config documents every limit and timeout and its default; a nil *Config
// means the defaults.
//
// Config.Driver chooses how a session moves bytes; the default suits most
// programs. DriverFastPaths (the default) cuts goroutine handoffs and
// copies: small Writes and waiting Reads use the connection themselves.
// DriverGoroutines is the plain reference. DriverEventLoop (Linux; plain
// TCP and Unix sockets, others fall back to DriverFastPaths) gives
// sessions no goroutine of their own, so an idle session costs only its
// memory: a server holding many quiet sessions sets it in the Config it
// passes to Upgrade (or to Server and NewSession for connections it
// upgraded itself) and takes streams with Config.Handler rather than an
// AcceptStream loop per session (Example (EventLoop)). Steady-state reads
// and writes do not allocate.
//
// With Config.Resume a session survives the loss of its connection: the
// client redials, the server's ResumeRegistry hands the new connection to
// the suspended session, and Config.OnResumeEvent reports every drop,
// resume, refusal and failed redial (docs/resume.md).
//
// WSMUX/1 is specified in docs/spec/wsmux-v1.md of this repository
// (https://github.com/wsmux/wsmux/blob/main/docs/spec/wsmux-v1.md); the
// limits and timeouts of Config are the values its sections 9 and 11
// recommend, and testdata/vectors holds the vectors it is tested against.
//
// How the package is built (its drivers, the seam they share, the path
// of a DATA frame) is described for maintainers in docs/mux-internals.md.
package mux
