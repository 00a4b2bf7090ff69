package recording

import (
	"strings"
	"testing"

	"github.com/wsmux/wsmux/controller"
)

func TestPolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(`
sessions:
- users: [ci-bot]
  record: false
- namespaces: [prod]
  stdin: true
- groups: [contractors]
  subresources: [exec, attach]
auditors:
  users: [alice]
  groups: [security]
`))
	if err != nil {
		t.Fatal(err)
	}
	alice := controller.User{Name: "alice"}
	bob := controller.User{Name: "bob", Groups: []string{"contractors"}}
	bot := controller.User{Name: "ci-bot", Groups: []string{"contractors"}}
	eve := controller.User{Name: "eve", Groups: []string{"security"}}
	tgt := func(ns, sub string) controller.Target {
		return controller.Target{Namespace: ns, Pod: "p", Subresource: sub}
	}
	for _, tc := range []struct {
		u    controller.User
		t    controller.Target
		want Decision
	}{
		{alice, tgt("prod", "exec"), Decision{Record: true, Stdin: true}},
		{alice, tgt("dev", "exec"), Decision{}},
		{bob, tgt("dev", "exec"), Decision{Record: true}},
		{bob, tgt("dev", "portforward"), Decision{}},
		{bot, tgt("prod", "exec"), Decision{}},
	} {
		if got := p.Decide(tc.u, tc.t); got != tc.want {
			t.Errorf("%s %s/%s: %+v, want %+v", tc.u.Name, tc.t.Namespace, tc.t.Subresource, got, tc.want)
		}
	}
	for u, want := range map[string]bool{"alice": true, "bob": false, "eve": true} {
		users := map[string]controller.User{"alice": alice, "bob": bob, "eve": eve}
		if p.MayAudit(users[u]) != want {
			t.Errorf("MayAudit(%s) != %v", u, want)
		}
	}
	for _, bad := range []struct{ doc, want string }{
		{"sessions:\n- subresources: [logs]\n", "subresource"},
		{"sessions:\n- pods: ['[']\n", "pattern"},
		{"session: []\n", "unknown field"},
	} {
		if _, err := ParsePolicy([]byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v", bad.doc, err)
		}
	}
}

func TestRecorderWithoutPolicy(t *testing.T) {
	r := newRec(t, Config{Sink: &memSink{}, Stdin: true})
	if d := r.Decide(controller.User{Name: "x"}, controller.Target{Subresource: "exec"}); !d.Record || !d.Stdin {
		t.Errorf("no policy: %+v, want every session recorded with stdin", d)
	}
	if r.MayAudit(controller.User{Name: "x"}) {
		t.Error("no policy: nobody may audit")
	}
}
