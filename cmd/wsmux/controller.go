package main

import (
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/gateway"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/handoff"
	"github.com/wsmux/wsmux/gateway/ticket"
)

// controllerFlags are the gateway's flags for controllers that hand it
// sessions (docs/controller.md): one-time tickets and the socket handoff.
type controllerFlags struct {
	handoffSocket string
	allowUIDs     []int
	ticketKeys    []string
	// maxConns bounds the handed-off connections (the gateway's
	// --max-connections; negative: no limit).
	maxConns int
	// sharedTickets, set with --shared-state, remembers used tickets
	// across the fleet.
	sharedTickets ticket.SharedTickets
}

func (f *controllerFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.handoffSocket, "handoff-socket", "", "Unix socket (SOCK_SEQPACKET) on which a controller hands off clients' connected sockets with their caller and target (docs/controller.md); Linux only")
	fl.IntSliceVar(&f.allowUIDs, "handoff-allow-uid", nil, "uids (SO_PEERCRED) that may hand off on --handoff-socket, comma-separated or repeated (default: the gateway's own uid)")
	fl.StringArrayVar(&f.ticketKeys, "ticket-key", nil, "file of HMAC keys (base64, one per line) for one-time tickets minted by a controller (docs/controller.md); repeat it, or put two keys in the file, during a key rollover (at most two keys)")
}

// start wraps h with the ticket handler (with --ticket-key) and starts the
// handoff listener (with --handoff-socket); stop closes the listener.
// Mistakes in the flags are usage errors.
func (f *controllerFlags) start(a *app, g *gateway.Gateway, h http.Handler, reloadEvery time.Duration) (http.Handler, func(), error) {
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if len(f.allowUIDs) > 0 && f.handoffSocket == "" {
		return nil, nil, usageErrorf("--handoff-allow-uid needs --handoff-socket")
	}
	for _, u := range f.allowUIDs {
		if u < 0 {
			return nil, nil, usageErrorf("--handoff-allow-uid %d: want a uid (0 or more)", u)
		}
	}
	if len(f.ticketKeys) > 0 {
		keys, err := ticket.ReadKeys(f.ticketKeys)
		if err != nil {
			return nil, nil, usageErrorf("--ticket-key: %v", err)
		}
		v := &ticket.Verifier{Shared: f.sharedTickets}
		v.SetKeys(keys)
		th, err := ticket.NewHandler(ticket.Config{Verifier: v, Next: h, ServeAs: g.ServeAs, Metrics: g.Metrics(), Logger: a.log})
		if err != nil {
			return nil, nil, err
		}
		h = th
		if reloadEvery > 0 {
			// A change to any key file re-reads them all: a rollover adds the
			// new key, then removes the old one, without a restart.
			done := make(chan struct{})
			stops = append(stops, func() { close(done) })
			for _, p := range f.ticketKeys {
				r := &auth.FileReloader{Path: p, What: "ticket key file", Log: a.log, Load: func([]byte) error {
					keys, err := ticket.ReadKeys(f.ticketKeys)
					if err == nil {
						v.SetKeys(keys)
					}
					return err
				}}
				_ = r.Reload() // read above; this records the file's state
				go r.Watch(done, reloadEvery)
			}
		}
		a.log.Info("gateway: accepting one-time tickets", "key_files", f.ticketKeys, "keys", len(keys))
	}
	if f.handoffSocket != "" {
		uids := f.allowUIDs
		if len(uids) == 0 {
			uids = []int{os.Getuid()}
		}
		s, err := handoff.Listen(handoff.Config{Path: f.handoffSocket, AllowUIDs: uids, ServeAs: g.ServeAs,
			Stopping: g.Health().Stopping, Metrics: g.Metrics(), Logger: a.log, MaxConns: f.maxConns})
		if err != nil {
			stop()
			return nil, nil, usageErrorf("--handoff-socket: %v", err)
		}
		go func() {
			if err := s.Serve(); err != nil {
				a.log.Error("gateway: the handoff socket failed; no more handoffs", "socket", f.handoffSocket, "error", err)
			}
		}()
		stops = append(stops, func() { _ = s.Close() })
		a.log.Info("gateway: accepting socket handoffs", "socket", f.handoffSocket, "allowed_uids", uids)
	}
	return h, stop, nil
}
