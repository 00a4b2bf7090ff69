package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
)

// HandoffVersion is the version of the handoff message (its "v").
const HandoffVersion = 1

// MaxHandoffMessage bounds a handoff message (the JSON, with the bytes
// already read in base64): the gateway refuses longer ones as truncated.
const MaxHandoffMessage = 128 << 10

// User is a caller as the cluster should see it: the gateway impersonates
// it (Impersonate-User, -Uid, -Group), so the cluster's RBAC decides. It is
// the one user type of wsmux: tickets and handoff messages carry it, and the
// gateway's authenticators (package gateway/auth) return it.
type User struct {
	// ID names the credential that authenticated the caller, in logs and
	// per-caller limits: "token#N", "cert:CN", "ticket:NAME",
	// "handoff:NAME" or an authenticator's own. It is the gateway's, never
	// sent on: tickets and handoff messages do not carry it.
	ID     string   `json:"-"`
	Name   string   `json:"name"`
	UID    string   `json:"uid,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Target is what a handed-off session opens. For exec, Command is
// required; Container empty means the pod's default container. Stdin,
// Stdout, Stderr and TTY, when nil, are taken from the client's request
// (its query), which only says which streams the client will open.
type Target struct {
	Namespace   string   `json:"namespace"`
	Pod         string   `json:"pod"`
	Subresource string   `json:"subresource"` // exec, attach or portforward
	Container   string   `json:"container,omitempty"`
	Command     []string `json:"command,omitempty"`
	Stdin       *bool    `json:"stdin,omitempty"`
	Stdout      *bool    `json:"stdout,omitempty"`
	Stderr      *bool    `json:"stderr,omitempty"`
	TTY         *bool    `json:"tty,omitempty"`
}

// Validate checks what the gateway needs of a target.
func (t Target) Validate() error {
	switch {
	case !nameRE.MatchString(t.Namespace) || len(t.Namespace) > 63:
		return fmt.Errorf("target: namespace %q: want a Kubernetes name (lower-case letters, digits and '-')", t.Namespace)
	case !nameRE.MatchString(t.Pod) || len(t.Pod) > 253:
		return fmt.Errorf("target: pod %q: want a Kubernetes name (lower-case letters, digits, '-' and '.')", t.Pod)
	case t.Subresource != "exec" && t.Subresource != "attach" && t.Subresource != "portforward":
		return fmt.Errorf("target: subresource %q: want exec, attach or portforward", t.Subresource)
	case t.Subresource == "exec" && len(t.Command) == 0:
		return errors.New("target: exec without a command: the controller decides what runs")
	case t.Subresource != "exec" && len(t.Command) > 0:
		return fmt.Errorf("target: a command for %s (only exec runs one)", t.Subresource)
	}
	return nil
}

// HandoffMessage is the JSON a controller sends with the client's socket
// (one SCM_RIGHTS descriptor, in the same SOCK_SEQPACKET message).
type HandoffMessage struct {
	V      int    `json:"v"` // HandoffVersion
	User   User   `json:"user"`
	Target Target `json:"target"`
	// Data are the bytes the controller already read from the socket: the
	// request head and whatever followed it (base64 in the JSON). The
	// gateway reads them before the socket.
	Data []byte `json:"data"`
	// RemoteAddr is the client's address for the gateway's logs (default:
	// the socket's peer).
	RemoteAddr string `json:"remote_addr,omitempty"`
}

// HandoffReply is the gateway's answer to each message: OK, or the
// reason (a wsmux_handoffs_total result) and what went wrong.
type HandoffReply struct {
	V      int    `json:"v"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// HandoffError is a handoff the gateway refused (Reason is a
// wsmux_handoffs_total result, or "closed" when it closed the connection
// without reading, as it does for a uid it does not allow).
type HandoffError struct{ Reason, Message string }

// Reasons of refused handoffs that ParseHandoffMessage finds (the gateway
// has more: see docs/controller.md).
const (
	HandoffBadMessage = "bad_message" // not the JSON of a version 1 message, or an invalid one
	HandoffTLS        = "tls"         // the bytes already read start a TLS handshake
)

// ParseHandoffMessage decodes a handoff message strictly (an unknown key
// is refused: it could be a restriction this version does not know) and
// checks it: version, user, target, and that the bytes already read are
// not TLS. On error, reason is HandoffBadMessage or HandoffTLS.
func ParseHandoffMessage(b []byte) (m HandoffMessage, reason string, err error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		return m, HandoffBadMessage, fmt.Errorf("not a handoff message: %v", err)
	}
	if d.More() {
		return m, HandoffBadMessage, errors.New("data after the JSON message")
	}
	switch {
	case m.V != HandoffVersion:
		return m, HandoffBadMessage, fmt.Errorf("version %d: this gateway speaks version %d", m.V, HandoffVersion)
	case m.User.Name == "":
		return m, HandoffBadMessage, errors.New("no user name: the gateway acts as the caller upstream")
	}
	if err := m.Target.Validate(); err != nil {
		return m, HandoffBadMessage, err
	}
	if len(m.Data) >= 3 && m.Data[0] == 0x16 && m.Data[1] == 0x03 {
		return m, HandoffTLS, errors.New("the bytes already read start a TLS handshake: TLS state cannot move between processes; end TLS in front of the controller, or use tickets")
	}
	return m, "", nil
}

// HandoffClosed is HandoffError's Reason when the gateway closed the
// connection without answering (the socket never reached it).
const HandoffClosed = "closed"

func (e *HandoffError) Error() string {
	return "wsmux gateway refused the handoff (" + e.Reason + "): " + e.Message
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// podPathRE is the path of the pod subresources wsmux serves; names are
// DNS-1123 labels (namespace) and subdomains (pod), as Kubernetes has them.
var podPathRE = regexp.MustCompile(`^/api/v1/namespaces/([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)/pods/([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)/(exec|attach|portforward)$`)

// ParsePodPath parses the path of a pod subresource,
// /api/v1/namespaces/NS/pods/POD/{exec|attach|portforward}, into the
// target's Namespace, Pod and Subresource; false if p is not one (a name
// that is not a valid Kubernetes name included). It is the one parser of
// these paths: the gateway's, the tickets' and the handoff's.
func ParsePodPath(p string) (Target, bool) {
	m := podPathRE.FindStringSubmatch(p)
	if m == nil {
		return Target{}, false
	}
	return Target{Namespace: m[1], Pod: m[3], Subresource: m[5]}, true
}

// TargetFromRequest reads the target of a request made to the Kubernetes
// paths (/api/v1/namespaces/NS/pods/POD/exec?command=...&container=...,
// as wsmux exec and kubectl send them); false if the path is not one.
// A controller with its own URLs builds the Target itself.
func TargetFromRequest(r *http.Request) (Target, bool) {
	t, ok := ParsePodPath(r.URL.Path)
	if !ok {
		return Target{}, false
	}
	q := r.URL.Query()
	t.Container, t.Command = q.Get("container"), q["command"]
	for k, p := range map[string]**bool{"stdin": &t.Stdin, "stdout": &t.Stdout, "stderr": &t.Stderr, "tty": &t.TTY} {
		if v, err := strconv.ParseBool(q.Get(k)); err == nil {
			*p = &v
		}
	}
	return t, true
}

// Query is the target as the query of the upstream request; flags the
// target leaves nil come from client (the client's own query).
func (t Target) Query(client url.Values) url.Values {
	q := url.Values{}
	if t.Container != "" {
		q.Set("container", t.Container)
	}
	if len(t.Command) > 0 {
		q["command"] = t.Command
	}
	for k, p := range map[string]*bool{"stdin": t.Stdin, "stdout": t.Stdout, "stderr": t.Stderr, "tty": t.TTY} {
		switch {
		case p != nil:
			q.Set(k, strconv.FormatBool(*p))
		case client.Has(k):
			q.Set(k, client.Get(k))
		}
	}
	return q
}

// NoAnswerError is a handoff sent without an answer (a timeout): the
// gateway may be serving the socket, so the controller must not write to
// it; it only closes its copy.
type NoAnswerError struct{ Err error }

func (e *NoAnswerError) Error() string {
	return "controller: no answer from the gateway to the handoff: " + e.Err.Error()
}
func (e *NoAnswerError) Unwrap() error { return e.Err }

// ErrTLS is HandoffHTTP's error for a request that came over TLS: TLS
// state cannot move to another process, so TLS must end in front of the
// controller (a load balancer, a proxy), or the controller uses tickets.
var ErrTLS = errors.New("controller: cannot hand off a TLS connection: terminate TLS in front of the controller, or use tickets")

// ErrHandoffUnsupported is what Handoff and HandoffHTTP return on systems
// without Unix sockets' descriptor passing (SCM_RIGHTS), such as Windows:
// use tickets there.
var ErrHandoffUnsupported = errors.New("controller: socket handoff needs a Unix system (descriptor passing); use tickets")
