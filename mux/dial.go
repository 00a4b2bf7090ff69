package mux

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/wsmux/wsmux/internal/cookiekeep"
	"github.com/wsmux/wsmux/internal/wshandshake"
)

// Subprotocol is the WebSocket subprotocol of WSMUX/1, offered by Dial and
// required by Upgrade.
const Subprotocol = wshandshake.Subprotocol

// HandshakeError reports a failed WebSocket handshake: on Dial, the
// server's HTTP status (with its headers and the start of its body) when it
// did not switch protocols; on Upgrade, the status answered to the client.
type HandshakeError = wshandshake.HandshakeError

// Dialer opens client sessions over ws:// and wss:// URLs.
type Dialer struct {
	// Config configures the sessions; nil means DefaultConfig().
	Config *Config
	// Header holds extra request headers of the upgrade (Authorization,
	// X-Stream-Protocol-Version...). A resumable session (Config.Resume)
	// sends them again on every redial, with the resume headers added and
	// the cookies the server set on its 101s (Set-Cookie) in Cookie, after
	// Header's own, so that cookie affinity brings the resume to the
	// replica that holds the session; Header is read at each redial, so it
	// must not change while the session lives.
	Header http.Header
	// TLSConfig configures TLS for wss:// URLs; nil means the defaults.
	TLSConfig *tls.Config
	// NetDial opens the TCP connection; nil means a net.Dialer.
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// HandshakeTimeout bounds the WebSocket handshake; zero means 10 s.
	HandshakeTimeout time.Duration
}

// Dial connects to url (ws:// or wss://), performs the WebSocket handshake
// offering Subprotocol and starts the client side of a session.
func (d *Dialer) Dial(ctx context.Context, url string) (*Session, error) {
	if err := d.Config.Validate(); err != nil {
		return nil, err
	}
	opts := wshandshake.DialOptions{
		Header:    d.Header,
		TLSConfig: d.TLSConfig,
		NetDial:   d.NetDial,
		Timeout:   d.HandshakeTimeout,
	}
	conn, br, hdr, err := wshandshake.Dial(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	s, err := NewSession(conn, br, true, d.Config)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	s.upgradeHeader = hdr
	if tok := hdr.Get(HeaderResumeToken); s.res != nil && tok != "" {
		// Cookies the server or a balancer set on the 101s go back with
		// every resume: cookie affinity brings it to the replica that
		// holds the session.
		jar := new(cookiekeep.Jar)
		jar.Keep(hdr)
		s.mu.Lock()
		s.res.token = tok
		s.res.redial = func(ctx context.Context, token string, received uint64) (net.Conn, *bufio.Reader, http.Header, error) {
			o := opts
			o.Header = d.Header.Clone()
			if o.Header == nil {
				o.Header = http.Header{}
			}
			jar.Apply(o.Header)
			o.Header.Set(HeaderResumeToken, token)
			o.Header.Set(HeaderResumeReceived, strconv.FormatUint(received, 10))
			conn, br, h, err := wshandshake.Dial(ctx, url, o)
			if err == nil {
				jar.Keep(h)
			}
			return conn, br, h, err
		}
		s.unlock()
	}
	return s, nil
}

// UpgradeHeader returns the headers of the server's 101 answer that
// started the session (Dialer.Dial; nil for a session it did not dial):
// X-Stream-Protocol-Version, cookies and the like. The caller must not
// modify it.
func (s *Session) UpgradeHeader() http.Header { return s.upgradeHeader }

// Dial connects to url with a zero Dialer and cfg; see Dialer.Dial.
func Dial(ctx context.Context, url string, cfg *Config) (*Session, error) {
	d := Dialer{Config: cfg}
	return d.Dial(ctx, url)
}

// Upgrade hijacks an HTTP request that asks for a WebSocket with
// Subprotocol, answers 101 and starts the server side of a session. Headers
// the handler set on w before calling Upgrade (for example
// X-Stream-Protocol-Version from Kubernetes' httpstream.Handshake) are sent
// with the 101. On a failed handshake it has already answered the client
// with an HTTP error and returns a *HandshakeError.
func Upgrade(w http.ResponseWriter, r *http.Request, cfg *Config) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		http.Error(w, "wsmux: bad server configuration", http.StatusInternalServerError)
		return nil, err
	}
	var respHeader http.Header
	if len(w.Header()) > 0 {
		respHeader = w.Header().Clone()
	}
	var reg *ResumeRegistry
	var tok string
	if cfg != nil && cfg.Resume && cfg.ResumeRegistry != nil {
		reg = cfg.ResumeRegistry
		if t := r.Header.Get(HeaderResumeToken); t != "" {
			return nil, reg.resume(w, r, t)
		}
		tok, _ = newToken()
		if respHeader == nil {
			respHeader = http.Header{}
		}
		respHeader.Set(HeaderResumeToken, tok)
		// Known before the 101 goes out; resumable once the session is set.
		reg.add(tok, nil, reg.identity(r))
	}
	conn, br, err := wshandshake.Upgrade(w, r, respHeader)
	if err != nil {
		if reg != nil {
			reg.set(tok, nil)
		}
		return nil, err
	}
	s, err := NewSession(conn, br, false, cfg)
	if err != nil {
		_ = conn.Close()
		if reg != nil {
			reg.set(tok, nil)
		}
		return nil, err
	}
	if reg != nil {
		// Under s.mu (lock order: s.mu, then the registry's): finish
		// either sees reg and forgets s after this, or ended is true.
		s.mu.Lock()
		if s.e.Err() == nil {
			s.res.reg = reg
			reg.set(tok, s)
		} else {
			reg.set(tok, nil)
		}
		s.unlock()
	}
	return s, nil
}
