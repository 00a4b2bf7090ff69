package conformance

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/internal/resetproxy"
	"github.com/wsmux/wsmux/internal/wshandshake"
	"github.com/wsmux/wsmux/mux"
)

// The resumption checks (docs/spec/wsmux-resume-v1.md, sections R1..R11
// in the report) run after the conversations. The first one finds out
// whether the peer negotiates RESUME; the others are SKIP when it does
// not (a peer without the extension conforms by ignoring the bit).

// resumeCheck is one resumption check.
type resumeCheck struct {
	name, section, rule string
	echo                bool // needs an echo application (--echo)
	run                 func(ctx context.Context, o *Options, st *resumeState) error
}

// resumeState carries what the negotiation check learnt.
type resumeState struct {
	negotiated bool
	why        string // SKIP reason when not negotiated
	token      string // a token of a session the runner dropped
}

var resumeChecks = []resumeCheck{
	{name: "resume-negotiated", section: "R1", rule: "a server that sets RESUME in its SETTINGS gives a resume token of 22..128 base64url characters in its 101",
		run: checkResumeNegotiated},
	{name: "resume-unknown-token", section: "R7", rule: "a resume with a token the server never issued is refused with 404 and Wsmux-Resume: unknown",
		run: checkResumeUnknownToken},
	{name: "resume-count-out-of-range", section: "R7", rule: "a resume whose received count is above what the server sent is refused with 409",
		run: checkResumeCountOutOfRange},
	{name: "resume-after-cut", section: "R8", rule: "after the TCP connection is reset mid-transfer, the session resumes and every byte arrives once, in order", echo: true,
		run: checkResumeAfterCut},
}

// runResume plays the resumption checks; add records each result.
func (o *Options) runResume(ctx context.Context, client bool, add func(Result)) {
	st := &resumeState{}
	checks := resumeChecks
	if !client {
		checks = resumeClientChecks
	}
	for i, c := range checks {
		if o.Run != nil && !o.Run.MatchString(c.name) {
			continue
		}
		r := Result{Name: c.name, Section: c.section, Rule: c.rule}
		var err error
		switch {
		case i > 0 && !st.negotiated && st.why != "":
			err = &skip{st.why}
		case c.echo && !o.Echo:
			err = &skip{"needs an echo application behind the peer (--echo)"}
		default:
			if i > 0 && !st.negotiated { // --run skipped the negotiation check
				if nerr := checks[0].run(ctx, o, st); nerr != nil {
					err = nerr
					break
				}
			}
			cctx, cancel := context.WithTimeout(ctx, o.Timeout+10*time.Second)
			err = c.run(cctx, o, st)
			cancel()
		}
		r.Status, r.Detail = verdict(err)
		add(r)
	}
}

// notNegotiated is the SKIP reason of a peer without RESUME.
const notNegotiated = "the peer does not negotiate RESUME (FEATURES bit 0x1 not set in its SETTINGS): resumption checks do not apply"

// dialRaw upgrades a connection to o.URL with extra headers; it returns
// the connection and the 101's headers, or the *HandshakeError.
func (o *Options) dialRaw(ctx context.Context, extra http.Header) (*wsConn, http.Header, error) {
	h := o.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for k, v := range extra {
		h[k] = v
	}
	conn, br, hdr, err := wshandshake.Dial(ctx, o.URL, wshandshake.DialOptions{Header: h, TLSConfig: o.TLS, Timeout: o.Timeout})
	if err != nil {
		return nil, nil, err
	}
	return newWSConn(conn, br, true), hdr, nil
}

// peerSettings sends our SETTINGS (offering RESUME) and reads the peer's.
func peerSettings(w *wsConn, deadline time.Time) (*frame.Settings, error) {
	_ = w.c.SetDeadline(deadline)
	var ours frame.Settings
	_ = ours.Set(frame.SettingFeatures, frame.FeatureResume)
	if err := w.writeFrame(ws.OpBinary, true, 0, frame.AppendSettings(nil, &ours), false); err != nil {
		return nil, err
	}
	for {
		op, msg, err := w.readMessage(1 << 20)
		if err != nil {
			return nil, fmt.Errorf("reading the peer's SETTINGS: %w", err)
		}
		if op != ws.OpBinary {
			continue
		}
		f, _, err := frame.Parse(msg, nil)
		if err != nil {
			return nil, failf("the peer's first message is not a valid frame: %v", err)
		}
		if f.Type != frame.TypeSettings {
			return nil, failf("the peer's first frame is %v, not SETTINGS (§2.2)", f.Type)
		}
		var s frame.Settings
		if err := frame.ParseSettings(f.Payload, &s); err != nil {
			return nil, failf("the peer's SETTINGS: %v", err)
		}
		return &s, nil
	}
}

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{22,128}$`)

func checkResumeNegotiated(ctx context.Context, o *Options, st *resumeState) error {
	w, hdr, err := o.dialRaw(ctx, nil)
	if err != nil {
		return err
	}
	set, err := peerSettings(w, time.Now().Add(o.Timeout))
	if err != nil {
		_ = w.c.Close()
		return err
	}
	features, _ := set.Get(frame.SettingFeatures)
	tok := hdr.Get(mux.HeaderResumeToken)
	if features&frame.FeatureResume == 0 {
		w.sendClose(ws.StatusNormalClosure)
		_ = w.c.Close()
		st.why = notNegotiated
		return &skip{st.why}
	}
	// Dropped without a close: the server suspends the session, which
	// the count check then tries to resume.
	_ = w.c.Close()
	if !tokenRE.MatchString(tok) {
		st.why = "the server sets RESUME but its 101 carries no valid resume token"
		return failf("the server sets RESUME in its SETTINGS but its 101 has %s %q: want 22..128 base64url characters (R6)", mux.HeaderResumeToken, tok)
	}
	st.negotiated, st.token = true, tok
	return nil
}

func checkResumeUnknownToken(ctx context.Context, o *Options, st *resumeState) error {
	var b [16]byte
	_, _ = rand.Read(b[:])
	w, _, err := o.dialRaw(ctx, http.Header{
		mux.HeaderResumeToken:    {base64.RawURLEncoding.EncodeToString(b[:])},
		mux.HeaderResumeReceived: {"0"},
	})
	if err == nil {
		_ = w.c.Close()
		return failf("the server upgraded a resume with a token it never issued")
	}
	var he *mux.HandshakeError
	if !errors.As(err, &he) {
		return err
	}
	if he.StatusCode != http.StatusNotFound || he.Header.Get("Wsmux-Resume") != "unknown" {
		return failf("answer %d with Wsmux-Resume %q; want 404 and \"unknown\" (R7)", he.StatusCode, he.Header.Get("Wsmux-Resume"))
	}
	return nil
}

func checkResumeCountOutOfRange(ctx context.Context, o *Options, st *resumeState) error {
	if st.token == "" {
		return &skip{"no token from the negotiation check"}
	}
	h := http.Header{mux.HeaderResumeToken: {st.token}, mux.HeaderResumeReceived: {strconv.FormatUint(1<<40, 10)}}
	for attempt := 0; ; attempt++ {
		w, _, err := o.dialRaw(ctx, h)
		if err == nil {
			_ = w.c.Close()
			return failf("the server resumed with a received count of 2^40 bytes it never sent")
		}
		var he *mux.HandshakeError
		if !errors.As(err, &he) {
			return err
		}
		switch {
		case he.StatusCode == http.StatusConflict:
			return nil
		case he.StatusCode == http.StatusServiceUnavailable && attempt < 10:
			// The session is still starting or being suspended: retry.
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		default:
			return failf("answer %d; want 409 (R7)", he.StatusCode)
		}
	}
}

// checkResumeAfterCut opens a resumable session through a proxy of the
// runner's own, echoes 4 MiB on one stream and resets the TCP connection
// when half of it came back.
func checkResumeAfterCut(ctx context.Context, o *Options, st *resumeState) error {
	const size = 4 << 20
	addr, err := serverAddr(o.URL)
	if err != nil {
		return err
	}
	px, err := resetproxy.Listen(addr)
	if err != nil {
		return err
	}
	defer px.Close()
	var mu sync.Mutex
	var events []string
	cfg := &mux.Config{Resume: true, ResumeTimeout: o.Timeout}
	resumed := make(chan struct{}, 1) // events come from the session's own goroutine
	cfg.OnResumeEvent = func(_ *mux.Session, e mux.ResumeEvent) {
		mu.Lock()
		events = append(events, e.Kind.String())
		mu.Unlock()
		if e.Kind == mux.ResumeResumed {
			select {
			case resumed <- struct{}{}:
			default:
			}
		}
	}
	// The Dialer does the TLS of wss:// URLs over the proxy's connection.
	d := mux.Dialer{Config: cfg, Header: o.Header, TLSConfig: o.TLS, HandshakeTimeout: o.Timeout,
		NetDial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, px.Addr())
		}}
	s, err := d.Dial(ctx, o.URL)
	if err != nil {
		return err
	}
	defer s.Close()
	stream, err := openRetrying(ctx, s, o.StreamHeader)
	if err != nil {
		return fmt.Errorf("opening a stream: %w", err)
	}
	_ = stream.SetDeadline(time.Now().Add(o.Timeout))
	if err := echoAcrossCut(stream, size, px.Cut); err != nil {
		return err
	}
	t := time.NewTimer(o.Timeout)
	select { // the echo came back over the resumed connection: its event follows
	case <-resumed:
	case <-t.C:
	}
	t.Stop()
	stats := s.Stats()
	mu.Lock()
	defer mu.Unlock()
	if stats.Suspends != 1 || stats.Resumes != 1 || len(events) != 2 || events[0] != "lost" || events[1] != "resumed" {
		return failf("%d suspensions, %d resumes, events %v: want 1, 1, [lost resumed]", stats.Suspends, stats.Resumes, events)
	}
	return nil
}

// echoAcrossCut writes size pattern bytes on stream (then FIN) and reads
// their echo, calling cut once when half of it came back; the echo must be
// every byte once, in order.
func echoAcrossCut(stream *mux.Stream, size int, cut func()) error {
	data := make([]byte, size)
	for i := range data {
		data[i] = patternByte(i)
	}
	go func() {
		if _, err := stream.Write(data); err == nil {
			_ = stream.CloseWrite()
		}
	}()
	h := sha256.New()
	buf := make([]byte, 32<<10)
	got, done := 0, false
	for {
		n, err := stream.Read(buf)
		h.Write(buf[:n])
		got += n
		if !done && got >= size/2 {
			cut()
			done = true
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return failf("after %d of %d echoed bytes (cut: %v): %v", got, size, done, err)
		}
	}
	if want := sha256.Sum256(data); got != size || [32]byte(h.Sum(nil)) != want {
		return failf("echoed %d bytes of %d, sha256 equal: %v", got, size, [32]byte(h.Sum(nil)) == want)
	}
	return nil
}

// openRetrying opens a stream, retrying a few times when the peer refuses
// it unprocessed (REFUSED_STREAM: a rate limit of the application).
func openRetrying(ctx context.Context, s *mux.Session, h http.Header) (*mux.Stream, error) {
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		st, err := s.Open(ctx, h)
		var se *mux.StreamError
		if err == nil || attempt == 8 || !errors.As(err, &se) || se.Code != frame.RefusedStream {
			return st, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		backoff *= 2
	}
}

// serverAddr returns the host:port a server URL (http, https, ws or wss)
// names, with the scheme's default port.
func serverAddr(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	port := u.Port()
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		port = cmp.Or(port, "80")
	case "https", "wss":
		port = cmp.Or(port, "443")
	default:
		return "", fmt.Errorf("server URL %q: scheme must be http, https, ws or wss", rawURL)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("server URL %q: no host", rawURL)
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
