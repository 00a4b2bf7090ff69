package recording

import (
	"fmt"
	"path"
	"slices"
	"sync/atomic"

	"sigs.k8s.io/yaml"

	"github.com/wsmux/wsmux/controller"
)

// Policy says which sessions are recorded and who may replay recordings.
// The first rule that matches a session decides; a session no rule matches
// is not recorded.
//
//	sessions:
//	- namespaces: [prod]        # anyone's sessions in prod
//	  stdin: true               # with what the caller types
//	- users: [ci-bot]
//	  record: false             # never ci-bot's
//	- groups: [contractors]     # contractors' sessions anywhere
//	  subresources: [exec, attach]
//	auditors:                   # may list and replay at /ui/recordings/
//	  users: [alice]
//	  groups: [security]
type Policy struct {
	Sessions []Rule   `json:"sessions"`
	Auditors Subjects `json:"auditors"`
}

// Subjects names callers by user name or group; "*" is anyone.
type Subjects struct {
	Users  []string `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Rule is one rule of a Policy. Omitted fields match anything: a rule with
// no users and no groups matches every caller.
type Rule struct {
	Users        []string `json:"users,omitempty"`
	Groups       []string `json:"groups,omitempty"`
	Namespaces   []string `json:"namespaces,omitempty"`
	Pods         []string `json:"pods,omitempty"`
	Subresources []string `json:"subresources,omitempty"`
	// Record: false exempts the sessions the rule matches (default true).
	Record *bool `json:"record,omitempty"`
	// Stdin records what the caller sends, which carries passwords typed
	// at prompts (default false).
	Stdin bool `json:"stdin,omitempty"`
}

// Decision is what a Policy says of one session.
type Decision struct {
	Record bool
	Stdin  bool
}

// ParsePolicy parses a recording policy (YAML or JSON); unknown fields are
// errors, so a typo does not silently record less.
func ParsePolicy(b []byte) (*Policy, error) {
	var p Policy
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return nil, fmt.Errorf("recording policy: %w", err)
	}
	for i, r := range p.Sessions {
		for _, s := range r.Subresources {
			if s != "exec" && s != "attach" && s != "portforward" {
				return nil, fmt.Errorf("recording policy: rule %d: subresource %q: want exec, attach or portforward", i+1, s)
			}
		}
		for _, g := range append(append([]string(nil), r.Pods...), r.Namespaces...) {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("recording policy: rule %d: pattern %q: %v", i+1, g, err)
			}
		}
	}
	return &p, nil
}

func matchAny(patterns []string, v string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, v); ok || p == "*" {
			return true
		}
	}
	return false
}

func (s Subjects) has(u controller.User) bool {
	if slices.Contains(s.Users, "*") || slices.Contains(s.Groups, "*") || (u.Name != "" && slices.Contains(s.Users, u.Name)) {
		return true
	}
	for _, g := range u.Groups {
		if slices.Contains(s.Groups, g) {
			return true
		}
	}
	return false
}

// Decide says whether the session of u on t is recorded, and with stdin.
func (p *Policy) Decide(u controller.User, t controller.Target) Decision {
	for _, r := range p.Sessions {
		who := Subjects{Users: r.Users, Groups: r.Groups}
		if (len(r.Users) > 0 || len(r.Groups) > 0) && !who.has(u) {
			continue
		}
		if !matchAny(r.Namespaces, t.Namespace) || !matchAny(r.Pods, t.Pod) || !matchAny(r.Subresources, t.Subresource) {
			continue
		}
		if r.Record != nil && !*r.Record {
			return Decision{}
		}
		return Decision{Record: true, Stdin: r.Stdin}
	}
	return Decision{}
}

// MayAudit reports whether u may list and replay recordings.
func (p *Policy) MayAudit(u controller.User) bool { return p.Auditors.has(u) }

// PolicyStore holds the current Policy; Set replaces it atomically (a
// reloaded file).
type PolicyStore struct{ p atomic.Pointer[Policy] }

// Set installs p.
func (s *PolicyStore) Set(p *Policy) { s.p.Store(p) }

// Get returns the current policy (nil: none).
func (s *PolicyStore) Get() *Policy { return s.p.Load() }
