package engine

import (
	"errors"
	"io"
	"testing"

	"github.com/wsmux/wsmux/frame"
)

// TestSuspendOnlyOnceInEffect: a session may be suspended only once both
// endpoints' SETTINGS set RESUME (spec: resumption, sections 1 and 5). A
// connection lost before the peer's SETTINGS arrived, or after SETTINGS
// without RESUME, is not suspended: an endpoint that suspended then would
// hold the session, its streams and what it retained for the resume
// timeout, for a peer that cannot have agreed to resume it.
func TestSuspendOnlyOnceInEffect(t *testing.T) {
	off := resumeConfig()
	off.Resume = false
	for _, tc := range []struct {
		name string
		// The client's SETTINGS reached the server, the server's the
		// client.
		toServer, toClient bool
		serverCfg          Config
		// Whether each side may suspend.
		client, server bool
	}{
		{name: "no SETTINGS arrived", serverCfg: resumeConfig()},
		{name: "only the client's arrived", toServer: true, serverCfg: resumeConfig(), server: true},
		{name: "only the server's arrived", toClient: true, serverCfg: resumeConfig(), client: true},
		{name: "both arrived", toServer: true, toClient: true, serverCfg: resumeConfig(), client: true, server: true},
		{name: "the server's lacked RESUME", toServer: true, toClient: true, serverCfg: off},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, 11, resumeConfig(), tc.serverCfg)
			p.pump(p.a) // the client's SETTINGS, the first thing it sends
			p.pump(p.b)
			if tc.toServer {
				p.deliver(p.b, 1<<30)
			}
			if tc.toClient {
				p.deliver(p.a, 1<<30)
			}
			p.aToB, p.bToA = nil, nil // the rest is lost with the connection
			for _, c := range []struct {
				s    *pairSide
				want bool
			}{{p.a, tc.client}, {p.b, tc.server}} {
				if got := c.s.e.Suspend(p.now); got != c.want {
					t.Errorf("%s: Suspend = %v, want %v", c.s.name, got, c.want)
				}
				if got := c.s.e.Suspended(); got != c.want {
					t.Errorf("%s: Suspended = %v, want %v", c.s.name, got, c.want)
				}
				// Not suspended: the driver ends the session, saying
				// why when resumption was still to be negotiated.
				pending := !c.want && tc.serverCfg.Resume
				if got := c.s.e.LostBeforeResume(io.EOF); got != pending {
					t.Errorf("%s: LostBeforeResume = %v, want %v", c.s.name, got, pending)
				}
				if !pending {
					continue
				}
				se := c.s.e.Err()
				if se == nil || se.Code != frame.InternalError || !errors.Is(se, ErrResumeNotNegotiated) || !errors.Is(se, io.EOF) {
					t.Errorf("%s: ended with %v, want INTERNAL_ERROR wrapping ErrResumeNotNegotiated and the read error", c.s.name, se)
				} else if c.s.e.RetainedBytes() != 0 {
					t.Errorf("%s: %d bytes still retained", c.s.name, c.s.e.RetainedBytes())
				}
				t.Logf("%s: %v", c.s.name, se)
			}
		})
	}
}
