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
// Structure: a session is a pure protocol engine (mux/internal/engine:
// messages, time and calls in; events and batches of frames out; no
// sockets, no goroutines, no clock of its own) driven over the connection
// by a Driver. The reference driver (DriverGoroutines) runs one reader and
// one writer goroutine; the writer sends control frames before data and
// schedules data round-robin with an interactive class, batching
// everything ready into one WebSocket message per write. The default,
// DriverFastPaths, cuts goroutine handoffs and copies: a Write that finds
// the writer parked lays out and writes its own batch (any Write of at most
// 4 KiB, and a larger one when its stream is the only one sending and has
// no write deadline);
// DATA that arrives while a Read waits is copied straight into that Read's
// buffer; on TCP and Unix sockets (and TLS over them) a Read that waits
// reads the connection itself (leader reads, lead.go); on plain TCP and
// Unix sockets the writer sends DATA from its send chunks with one writev
// instead of copying it into the batch. Steady-state reads and writes do
// not allocate. DriverEventLoop (Linux; plain TCP and Unix sockets) gives
// sessions no goroutine of their own: one epoll instance, a bounded pool
// of workers and one timer wheel serve every session of the process
// (evloop.go), so an idle session costs only its memory; TLS and other
// connections fall back to DriverFastPaths. A server holding many quiet
// sessions sets Driver: DriverEventLoop in the Config it passes to Upgrade
// (or to Server and NewSession for connections it upgraded itself) and
// takes streams with Config.Handler rather than an AcceptStream loop per
// session, so that a waiting session holds no goroutine (Example
// (EventLoop)).
//
// WSMUX/1 is specified in docs/spec/wsmux-v1.md of this repository
// (https://github.com/wsmux/wsmux/blob/main/docs/spec/wsmux-v1.md); the
// limits and timeouts of Config are the values its sections 9 and 11
// recommend, and testdata/vectors holds the vectors it is tested against.
//
// Package mux must not import Kubernetes packages or the adapters; only
// its engine may change protocol state, and only the drivers (driver.go,
// lead.go, evloop.go) may touch the connection.
package mux
