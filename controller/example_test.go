package controller_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/wsmux/wsmux/controller"
)

// A controller mints a one-time ticket for the caller it authenticated and
// the one exec it authorized, then redirects the client to the gateway
// with it; the gateway (which holds the same key) checks the MAC, the
// clock and the target. Here both halves run in one program.
func ExampleMintTicket() {
	key := []byte("0123456789abcdef0123456789abcdef") // from the key file, shared with the gateway
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

	// Controller: alice (group dev) may run "sh" in default/web-0, once, within 30 s.
	target := controller.Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Command: []string{"sh"}}
	claims, err := controller.NewClaims(controller.User{Name: "alice", Groups: []string{"dev"}}, target, now, 30*time.Second)
	if err != nil {
		panic(err)
	}
	ticket, err := controller.MintTicket(key, claims)
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.HasPrefix(ticket, controller.TicketPrefix))

	// Gateway: the request the client brings, with the ticket.
	r, _ := http.NewRequest("GET", "http://gateway/api/v1/namespaces/default/pods/web-0/exec?command=sh&stdin=true&ticket="+ticket, nil)
	got, _, err := controller.ParseTicket([][]byte{key}, r.URL.Query().Get("ticket"))
	if err != nil {
		panic(err)
	}
	asked, _ := controller.TargetFromRequest(r)
	fmt.Println(got.User, got.Groups, got.CheckTime(now.Add(10*time.Second)), got.CheckTarget(asked))

	// A minute later, or for another pod, it is refused, with a reason.
	var te *controller.TicketError
	if err := got.CheckTime(now.Add(time.Minute)); errors.As(err, &te) {
		fmt.Println(te.Reason)
	}
	asked.Pod = "db-0"
	if err := got.CheckTarget(asked); errors.As(err, &te) {
		fmt.Println(te.Reason)
	}
	// Output:
	// true
	// alice [dev] <nil> <nil>
	// ticket_expired
	// ticket_wrong_target
}
