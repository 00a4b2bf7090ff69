// Package conformance is the WSMUX/1 conformance runner behind `wsmux
// conformance`: it plays the scripted conversations of
// testdata/vectors/conversations.json over raw WebSocket connections
// against any WSMUX/1 endpoint, as a client against a server (Dial) or as
// a server a client connects to (Listener), and reports PASS, FAIL or SKIP
// per check with the section of docs/spec/wsmux-v1.md it tests. Then come
// the checks of the resumption extension (docs/spec/wsmux-resume-v1.md,
// sections R1..R11): SKIP for a peer that does not negotiate RESUME.
//
// Every conversation runs on a connection of its own. Besides the
// conversation's own expectations the runner checks, on every frame the
// peer sends, the rules every peer keeps all the time: binary messages of
// whole valid frames, SETTINGS first and once, DATA within the windows the
// runner granted, stream ids of the peer's parity, increasing and within
// the runner's credit.
//
// It imports mux, frame, internal/wshandshake, internal/resetproxy and the test vectors; it must not import the adapters or
// the Kubernetes libraries (WSMUX/1 knows no Kubernetes), testing or the test
// helpers.
package conformance

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/testdata/vectors"
)

// Subprotocol is the WebSocket subprotocol of WSMUX/1.
const Subprotocol = "wsmux.v1"

// Options configure a run.
type Options struct {
	// URL (ws://, wss://) of a WSMUX/1 server: the runner is the client.
	URL string
	// Header holds extra upgrade request headers (Authorization...).
	Header http.Header
	// TLS configures wss:// URLs.
	TLS *tls.Config
	// Listener, when set instead of URL, accepts the connections of a
	// WSMUX/1 client under test: the runner is the server, and the client
	// must connect again after each session ends.
	Listener net.Listener
	// StreamHeader is the header block of the streams the runner opens
	// (for example the Target of a `wsmux tunnel serve`).
	StreamHeader http.Header
	// Echo says that the application behind the peer echoes every stream
	// the runner opens and half-closes after the runner's FIN; checks that
	// need it are skipped otherwise.
	Echo bool
	// Slow enables the checks that wait for a peer timer (SETTINGS
	// timeout, read timeout, keepalive): up to a minute each.
	Slow bool
	// Run, when set, runs only the checks whose name it matches.
	Run *regexp.Regexp
	// Timeout bounds each check (default 10 s); AcceptTimeout bounds the
	// wait for the client's next connection (default 30 s).
	Timeout, AcceptTimeout time.Duration
	// Conversations replaces the embedded conversations (tests).
	Conversations []byte
	// Out receives one line per check and the summary.
	Out io.Writer
}

// Result is the outcome of one check.
type Result struct {
	Name, Section, Rule string
	Status              string // PASS, FAIL or SKIP
	Detail              string
}

// Summary counts the results of a run.
type Summary struct {
	Results          []Result
	Pass, Fail, Skip int
	// Sections are the spec sections the run checked (a check passed or
	// failed there); Passing those of them where no check failed.
	Sections, Passing []string
}

// Load parses a conversations file.
func Load(b []byte) (*File, error) {
	var f File
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("conversations: %w", err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("conversations: version %d, want 1", f.Version)
	}
	return &f, nil
}

// Run plays every selected conversation and prints a line per check and
// a summary to o.Out. It returns an error only when the run itself could
// not go on (no connection at all, a broken conversations file); failed
// checks are in the Summary.
func Run(ctx context.Context, o Options) (*Summary, error) {
	raw := o.Conversations
	if raw == nil {
		raw = vectors.Conversations
	}
	file, err := Load(raw)
	if err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.AcceptTimeout <= 0 {
		o.AcceptTimeout = 30 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	client := o.Listener == nil
	if client {
		// One connection first: a server that cannot be reached or refuses
		// the credentials is an error of the run, not a row of failures.
		w, err := o.connect(ctx, true)
		if err != nil {
			var fatal *fatalError
			if errors.As(err, &fatal) {
				return nil, fatal.err
			}
			return nil, err
		}
		w.sendClose(ws.StatusNormalClosure)
		_ = w.c.Close()
	}
	sum := &Summary{}
	checked, failed := map[string]bool{}, map[string]bool{}
	add := func(r Result) {
		switch r.Status {
		case "PASS":
			sum.Pass++
			checked[r.Section] = true
		case "FAIL":
			sum.Fail++
			checked[r.Section] = true
			failed[r.Section] = true
		default:
			sum.Skip++
		}
		sum.Results = append(sum.Results, r)
		line := fmt.Sprintf("%-4s %-6s %-34s %s", r.Status, "§"+r.Section, r.Name, r.Rule)
		if r.Detail != "" {
			line += "\n     -> " + r.Detail
		}
		fmt.Fprintln(o.Out, line)
	}
	for i := range file.Conversations {
		c := &file.Conversations[i]
		if o.Run != nil && !o.Run.MatchString(c.Name) {
			continue
		}
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
		r := Result{Name: c.Name, Section: c.Section, Rule: c.Rule}
		if why := o.skipReason(c, client); why != "" {
			r.Status, r.Detail = "SKIP", why
		} else {
			r.Status, r.Detail = verdict(o.play(ctx, c, client))
		}
		add(r)
	}
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	o.runResume(ctx, client, add)
	for sec := range checked {
		sum.Sections = append(sum.Sections, sec)
		if !failed[sec] {
			sum.Passing = append(sum.Passing, sec)
		}
	}
	sort.Slice(sum.Sections, func(i, j int) bool { return sectionLess(sum.Sections[i], sum.Sections[j]) })
	fmt.Fprintf(o.Out, "%d checks: %d passed, %d failed, %d skipped; %d spec sections checked (%s), %d without a failure\n",
		sum.Pass+sum.Fail+sum.Skip, sum.Pass, sum.Fail, sum.Skip, len(sum.Sections), strings.Join(sum.Sections, " "), len(sum.Passing))
	return sum, nil
}

// sectionLess orders section numbers numerically ("2.10" after "2.9").
func sectionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, ex := strconv.Atoi(pa[i])
		y, ey := strconv.Atoi(pb[i])
		if ex != nil || ey != nil {
			if pa[i] != pb[i] {
				return pa[i] < pb[i]
			}
			continue
		}
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}

func (o *Options) skipReason(c *Conversation, client bool) string {
	for _, n := range c.Needs {
		switch n {
		case "echo":
			if !o.Echo {
				return "needs an echo application behind the peer (--echo)"
			}
		case "slow":
			if !o.Slow {
				return "waits for a peer timer (--slow)"
			}
		case "server":
			if !client {
				return "applies to servers only"
			}
		default:
			return "unknown need " + n
		}
	}
	return ""
}

// fatalError is a failure to get any connection.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

func (o *Options) play(ctx context.Context, c *Conversation, client bool) error {
	deadline := time.Now().Add(o.Timeout)
	for _, st := range c.Steps {
		if d, err := time.ParseDuration(st.Timeout); err == nil {
			deadline = deadline.Add(d)
		}
	}
	if len(c.Offer) > 0 {
		return o.refusedOffer(ctx, c)
	}
	w, err := o.connect(ctx, client)
	if err != nil {
		return err
	}
	defer func() {
		if !w.closed {
			_ = w.c.SetWriteDeadline(time.Now().Add(time.Second))
			w.sendClose(ws.StatusNormalClosure)
		}
		_ = w.c.Close()
	}()
	_ = w.c.SetWriteDeadline(deadline)
	s, err := newSession(w, client, c, o.StreamHeader, deadline)
	if err != nil {
		return err
	}
	return s.play(o.Timeout)
}

// connect opens the next session's connection: a dial, or the next
// client accepted.
func (o *Options) connect(ctx context.Context, client bool) (*wsConn, error) {
	if client {
		d := ws.Dialer{
			Protocols: []string{Subprotocol},
			Header:    ws.HandshakeHeaderHTTP(o.Header),
			TLSConfig: o.TLS,
			Timeout:   o.Timeout,
		}
		conn, br, hs, err := d.Dial(ctx, o.URL)
		if err != nil {
			return nil, &fatalError{fmt.Errorf("dial %s: %w", o.URL, err)}
		}
		if hs.Protocol != Subprotocol {
			_ = conn.Close()
			return nil, failf("the server did not select subprotocol %s (§2.1)", Subprotocol)
		}
		return newWSConn(conn, br, true), nil
	}
	c, err := o.accept(ctx)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(o.Timeout))
	offered := false
	u := ws.Upgrader{Protocol: func(p []byte) bool {
		if string(p) == Subprotocol {
			offered = true
		}
		return string(p) == Subprotocol
	}}
	br := bufio.NewReader(c)
	if _, err := u.Upgrade(struct {
		io.Reader
		io.Writer
	}{br, c}); err != nil {
		_ = c.Close()
		return nil, failf("the client's WebSocket handshake failed: %v (§2.1)", err)
	}
	if !offered {
		_ = c.Close()
		return nil, failf("the client did not offer subprotocol %s (§2.1)", Subprotocol)
	}
	_ = c.SetDeadline(time.Time{})
	return newWSConn(c, br, false), nil
}

// accept returns the next connection of the client, within AcceptTimeout.
func (o *Options) accept(ctx context.Context) (net.Conn, error) {
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := o.Listener.Accept()
		ch <- accepted{c, err}
	}()
	var a accepted
	select {
	case a = <-ch:
	case <-time.After(o.AcceptTimeout):
		_ = o.Listener.Close() // unblocks Accept; the run cannot go on
		<-ch
		return nil, &fatalError{errors.New("no client connected within the accept timeout")}
	case <-ctx.Done():
		_ = o.Listener.Close()
		<-ch
		return nil, ctx.Err()
	}
	if a.err != nil {
		return nil, &fatalError{a.err}
	}
	return a.c, nil
}

// refusedOffer dials offering only c.Offer: a WSMUX/1 server must refuse.
func (o *Options) refusedOffer(ctx context.Context, c *Conversation) error {
	d := ws.Dialer{Protocols: c.Offer, Header: ws.HandshakeHeaderHTTP(o.Header), TLSConfig: o.TLS, Timeout: o.Timeout}
	conn, _, hs, err := d.Dial(ctx, o.URL)
	if err == nil {
		_ = conn.Close()
		return failf("the server upgraded a request that offered %v (selected %q), not %s", c.Offer, hs.Protocol, Subprotocol)
	}
	var se ws.StatusError
	if errors.As(err, &se) {
		return nil
	}
	if errors.Is(err, ws.ErrHandshakeBadSubProtocol) {
		return failf("the server switched protocols with a subprotocol that was not offered")
	}
	if slices.Contains(c.Offer, Subprotocol) {
		return err
	}
	return failf("the upgrade offering %v failed without an HTTP error status: %v", c.Offer, err)
}

// verdict is a check's status and detail from the error it ended with.
func verdict(err error) (status, detail string) {
	var sk *skip
	var fl *failure
	switch {
	case err == nil:
		return "PASS", ""
	case errors.As(err, &sk):
		return "SKIP", sk.reason
	case errors.As(err, &fl):
		return "FAIL", fl.msg
	}
	return "FAIL", err.Error()
}
