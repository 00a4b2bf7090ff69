package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/recording"
)

// RecordingsAPI is where the replay page (/ui/recordings/) lists and
// fetches recordings, for the callers the recording policy lets audit.
const RecordingsAPI = "/ui/recordings/api/"

// sessionRecording is the recording of one session: its
// recording.Session, fed by recStream, the wrapper of each of the
// session's downstream streams (so v5, v4, SPDY and wsmux sessions are all
// recorded at the same place, the gateway's bridge).
type sessionRecording struct {
	rs       *recording.Session
	required bool
	log      *slog.Logger

	mu      sync.Mutex
	streams map[string]*recStream // by streamType: the failure message's way out
	ports   []string
	toPod   atomic.Int64
	fromPod atomic.Int64
	warned  bool
}

// startRecording opens the recording of the session r is, when the
// recording policy asks for one. With --recording-required a recording
// that cannot start refuses the session (503, a Status kubectl prints);
// ok is false then.
func (g *Gateway) startRecording(w http.ResponseWriter, r *http.Request, u controller.User, t controller.Target, proto string, log *slog.Logger) (sr *sessionRecording, ok bool) {
	rec := g.cfg.Recording
	if rec == nil {
		return nil, true
	}
	d := rec.Decide(u, t)
	if !d.Record {
		return nil, true
	}
	q := r.URL.Query()
	tty, _ := strconv.ParseBool(q.Get("tty"))
	m := recording.Meta{
		Kind: t.Subresource, Caller: u.ID, User: u.Name, UID: u.UID, Groups: u.Groups, Cluster: rec.Cluster(),
		Namespace: t.Namespace, Pod: t.Pod, Container: q.Get("container"), Command: q["command"],
		TTY: tty && t.Subresource != "portforward", Stdin: d.Stdin && t.Subresource != "portforward", Protocol: proto, Remote: r.RemoteAddr,
	}
	if m.Cluster == "" {
		m.Cluster = g.base.Host
	}
	rs, err := rec.Start(r.Context(), m)
	if err != nil {
		if rec.Required() {
			log.Error("gateway: refused a session: its recording is required and cannot start", "error", err)
			writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable",
				"wsmux gateway: this session must be recorded and the recording cannot start ("+err.Error()+
					"): try again later, or ask the gateway's operator to check the recording sink")
			return nil, false
		}
		log.Warn("gateway: session not recorded: the recording cannot start", "error", err)
		return nil, true
	}
	log.Info("gateway: recording the session", "recording", rs.Meta().ID, "stdin_recorded", m.Stdin)
	return &sessionRecording{rs: rs, required: rec.Required(), log: log, streams: map[string]*recStream{}}, true
}

// end closes the recording with the session's outcome.
func (sr *sessionRecording) end(rec *spliceRecord) {
	if sr == nil {
		return
	}
	e := recording.End{Exit: "not started"}
	if sp := rec.get(); sp != nil {
		e.Exit = exitStatus(sp.ErrorData())
	}
	sr.mu.Lock()
	e.Ports = slices.Clone(sr.ports)
	sr.mu.Unlock()
	e.ToPod, e.FromPod = sr.toPod.Load(), sr.fromPod.Load()
	if err := sr.rs.Close(e); err != nil {
		sr.log.Warn("gateway: the session's recording failed", "recording", sr.rs.Meta().ID, "error", err)
	}
}

// wrap returns s recorded.
func (sr *sessionRecording) wrap(s k8shttpstream.Stream) k8shttpstream.Stream {
	typ := s.Headers().Get("streamType")
	rs := &recStream{Stream: s, sr: sr, typ: typ}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if typ == "data" {
		if p := s.Headers().Get("port"); p != "" && !slices.Contains(sr.ports, p) && len(sr.ports) < 64 {
			sr.ports = append(sr.ports, p)
		}
	}
	if _, ok := sr.streams[typ]; !ok {
		sr.streams[typ] = rs
	}
	return rs
}

// watch ends the session c when its required recording fails, after
// telling the caller on its terminal (or stderr) and error stream why.
func (sr *sessionRecording) watch(c k8shttpstream.Connection) {
	if sr == nil {
		return
	}
	go func() {
		select {
		case <-sr.rs.Failed():
		case <-c.CloseChan():
			return
		}
		err := sr.rs.Err()
		if !sr.required {
			sr.log.Warn("gateway: the session's recording failed; the session goes on unrecorded", "recording", sr.rs.Meta().ID, "error", err)
			return
		}
		msg := "wsmux gateway: this session's recording failed (" + err.Error() +
			") and recording is required, so the session ends here; ask the gateway's operator to check the recording sink"
		sr.log.Error("gateway: ended a session: its required recording failed", "recording", sr.rs.Meta().ID, "error", err)
		sr.mu.Lock()
		out := sr.streams["stdout"]
		if e := sr.streams["stderr"]; e != nil && !sr.rs.Meta().TTY {
			out = e
		}
		status := sr.streams["error"]
		sr.mu.Unlock()
		if out != nil {
			out.inject([]byte("\r\n" + msg + "\r\n"))
		}
		if status != nil {
			b, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonServiceUnavailable, Message: msg})
			status.inject(b)
		}
		_ = c.Close()
	}()
}

// recStream records what passes on one stream of a recorded session:
// stdin and resize as the caller sends them, stdout and stderr as they
// are delivered to it, a port-forward's bytes as counts only.
type recStream struct {
	k8shttpstream.Stream
	sr  *sessionRecording
	typ string

	wmu    sync.Mutex // Write and inject
	resize []byte     // an incomplete resize message
}

func (s *recStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	if n > 0 {
		switch s.typ {
		case "stdin":
			s.sr.rs.Input(p[:n])
		case "resize":
			s.sizes(p[:n])
		case "data":
			s.sr.toPod.Add(int64(n))
		}
	}
	return n, err
}

func (s *recStream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	n, err := s.Stream.Write(p)
	if n > 0 {
		switch s.typ {
		case "stdout":
			s.sr.rs.Output(p[:n])
		case "stderr":
			if s.sr.rs.Meta().TTY {
				s.sr.rs.Output(p[:n])
			} else {
				s.sr.rs.Stderr(p[:n])
			}
		case "data":
			s.sr.fromPod.Add(int64(n))
		}
	}
	return n, err
}

// inject writes p to the caller, unrecorded, between the stream's writes.
func (s *recStream) inject(p []byte) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, _ = s.Stream.Write(p)
}

// maxResizeMessage bounds a resize message kept while incomplete.
const maxResizeMessage = 1 << 10

// sizes records the terminal sizes in p: JSON objects
// ({"Width":W,"Height":H}) one after the other, possibly cut anywhere.
func (s *recStream) sizes(p []byte) {
	s.resize = append(s.resize, p...)
	for len(s.resize) > 0 {
		d := json.NewDecoder(bytes.NewReader(s.resize))
		var sz struct{ Width, Height uint16 }
		err := d.Decode(&sz)
		if err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) || len(s.resize) > maxResizeMessage {
				s.resize = nil // not a size: nothing to record
			}
			return // else incomplete: wait for the rest
		}
		s.resize = s.resize[d.InputOffset():]
		s.sr.rs.Resize(int(sz.Width), int(sz.Height))
	}
}

// recordingsAPI serves the recordings of the directory sink for replay to
// the callers the recording policy lets audit.
func (g *Gateway) recordingsAPI() http.Handler {
	lib := g.cfg.Recording.Library()
	if lib == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeStatus(w, http.StatusNotFound, "NotFound", "wsmux gateway: recordings are not kept here (no --recording-dir): replay them where the recording sink sends them")
		})
	}
	authorize := func(w http.ResponseWriter, r *http.Request) bool {
		u, err := g.identify(r)
		if err != nil {
			g.m.AuthFailures.WithLabelValues(auth.AsError(err).Reason).Inc()
			auth.Reject(w, err)
			return false
		}
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		if oe := g.cfg.Origins.Check(r); oe != nil {
			g.crossOrigin(w, r, oe)
			return false
		}
		if !g.cfg.Recording.MayAudit(u) {
			g.forbidden(w, r, u, "the recording policy does not let this caller audit recordings: ask for a place in its auditors (users or groups)")
			return false
		}
		return true
	}
	return http.StripPrefix(RecordingsAPI[:len(RecordingsAPI)-1], recording.Handler(lib, authorize))
}
