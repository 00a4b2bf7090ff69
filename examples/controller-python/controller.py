#!/usr/bin/env python3
"""A controller in front of `wsmux gateway`, standard library only.

It plays a platform's API server (a PaaS's `run`, `logs -f`, shell): it
authenticates a request for /api/v1/namespaces/NS/pods/POD/{exec,attach,portforward}
with its own tokens, authorizes it with its own rules, and then lets the
gateway carry the session, in one of two ways (docs/controller.md):

  --handoff-socket PATH   hand the client's socket to the gateway (SCM_RIGHTS)
  --ticket-key FILE       answer 307 to the gateway's URL with a one-time ticket
                          (and the same as JSON: {"url", "ticket", "expires"})

The application is a WSGI callable (app); the small server below runs it and
offers environ["wsmux.handoff"], which needs the raw socket and the bytes
already read from it (a WSGI server that buffers, like wsgiref, cannot give
them back; gunicorn offers environ["gunicorn.socket"] but not its buffer).

    python3 controller.py --listen 127.0.0.1:8080 --users users.csv \\
        --allow alice=default --handoff-socket /run/wsmux/handoff.sock

users.csv is kube-apiserver's static token format: TOKEN,USER[,UID[,"GROUP1,GROUP2"]].
"""

import argparse
import csv
import json
import socket
import socketserver
import sys
from urllib.parse import quote

sys.dont_write_bytecode = True
import wsmux_controller as wc  # noqa: E402

MAX_HEAD = 64 << 10


def read_users(path):
    users = {}
    with open(path, newline="") as f:
        for row in csv.reader(line for line in f if line.strip() and not line.startswith("#")):
            row = [c.strip() for c in row]
            users[row[0]] = {"name": row[1], "uid": row[2] if len(row) > 2 else "",
                             "groups": [g for g in (row[3].split(",") if len(row) > 3 else []) if g]}
    return users


def make_app(users, allow, handoff_socket=None, ticket_key=None, gateway=None):
    """The controller's WSGI application."""

    def respond(start_response, status, body, headers=()):
        b = body.encode("utf-8")
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                                ("Content-Length", str(len(b)))] + list(headers))
        return [b]

    def app(environ, start_response):
        auth = environ.get("HTTP_AUTHORIZATION", "")
        user = users.get(auth[7:].strip()) if auth[:7].lower() == "bearer " else None
        if user is None:
            return respond(start_response, "401 Unauthorized", "controller: unknown or missing bearer token\n")
        query = environ.get("QUERY_STRING", "")
        target = wc.target_from_request(environ["PATH_INFO"] + ("?" + query if query else ""))
        if target is None:
            return respond(start_response, "404 Not Found", "controller: not a pod exec, attach or portforward\n")
        if target["namespace"] not in allow.get(user["name"], ()):
            return respond(start_response, "403 Forbidden", "controller: %s may not use namespace %s\n"
                           % (user["name"], target["namespace"]))
        if handoff_socket:
            try:
                environ["wsmux.handoff"](user, target)
            except (wc.HandoffError, wc.HandoffUnanswered) as e:
                return respond(start_response, "502 Bad Gateway", "controller: %s\n" % e)
            return []  # the gateway answers the client now
        ticket = wc.mint_ticket(ticket_key, user["name"], target["namespace"], target["pod"], target["subresource"],
                                uid=user["uid"], groups=user["groups"], container=target.get("container"),
                                command=target.get("command"), lifetime=30)
        url = gateway.rstrip("/") + environ["PATH_INFO"] + "?" + (query + "&" if query else "") + "ticket=" + quote(ticket)
        body = json.dumps({"url": url, "ticket": ticket, "expires_in": 30}) + "\n"
        start_response("307 Temporary Redirect", [("Location", url), ("Content-Type", "application/json"),
                                                  ("Content-Length", str(len(body))), ("Cache-Control", "no-store")])
        return [body.encode("utf-8")]

    return app


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, app, handoff_socket):
        super().__init__(addr, Handler)
        self.app = app
        self.handoff_socket = handoff_socket
        self.handed_off = set()

    def shutdown_request(self, request):
        # A handed-off socket is shared with the gateway: close our copy,
        # never shutdown(), which would end the client's connection.
        if request in self.handed_off:
            self.handed_off.discard(request)
            request.close()
        else:
            super().shutdown_request(request)


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk or len(data) > MAX_HEAD:
                return
            data += chunk
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        try:
            method, target, _ = head[0].split(" ", 2)
        except ValueError:
            return
        path, _, query = target.partition("?")
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
                   "REMOTE_ADDR": self.client_address[0], "wsgi.url_scheme": "http"}
        for line in head[1:]:
            k, _, v = line.partition(":")
            environ["HTTP_" + k.strip().upper().replace("-", "_")] = v.strip()
        server = self.server

        def handoff(user, target):
            # Everything read so far, the request head and what followed it.
            try:
                wc.handoff(server.handoff_socket, sock, user, target, data,
                           remote_addr="%s:%d" % self.client_address)
            except wc.HandoffUnanswered:
                server.handed_off.add(sock)  # the gateway may be serving it: only close our copy
                raise
            server.handed_off.add(sock)
            print("controller: handed off %s's %s of %s/%s (%d bytes already read, %d past the head)"
                  % (user["name"], target["subresource"], target["namespace"], target["pod"], len(data),
                     len(data) - len(data.split(b"\r\n\r\n", 1)[0]) - 4), flush=True)

        environ["wsmux.handoff"] = handoff
        status = []
        body = self.server.app(environ, lambda s, h: status.append((s, h)))
        if sock in server.handed_off:
            return
        s, h = status[0]
        out = "HTTP/1.1 %s\r\n%sConnection: close\r\n\r\n" % (s, "".join("%s: %s\r\n" % kv for kv in h))
        sock.sendall(out.encode("latin-1") + b"".join(body))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--listen", default="127.0.0.1:8080", help="HOST:PORT (port 0: any)")
    p.add_argument("--users", required=True, help="token file: TOKEN,USER[,UID[,\"GROUPS\"]] per line")
    p.add_argument("--allow", action="append", default=[], help="USER=NS1,NS2: namespaces USER may use (repeat)")
    p.add_argument("--handoff-socket", help="the gateway's --handoff-socket: hand sockets off")
    p.add_argument("--ticket-key", help="a key file the gateway's --ticket-key holds: mint tickets (first key)")
    p.add_argument("--gateway", help="the gateway's URL, for the tickets' redirects")
    a = p.parse_args()
    if bool(a.handoff_socket) == bool(a.ticket_key) or (a.ticket_key and not a.gateway):
        p.error("pass --handoff-socket PATH, or --ticket-key FILE with --gateway URL")
    allow = {}
    for rule in a.allow:
        user, _, nss = rule.partition("=")
        allow.setdefault(user, set()).update(n for n in nss.split(",") if n)
    key = wc.read_keys(a.ticket_key)[0] if a.ticket_key else None
    app = make_app(read_users(a.users), allow, a.handoff_socket, key, a.gateway)
    host, _, port = a.listen.rpartition(":")
    with Server((host, int(port)), app, a.handoff_socket) as srv:
        h, p_ = srv.server_address[:2]
        print("controller: listening on http://%s:%d (%s)" % (h, p_, "handoff" if a.handoff_socket else "tickets"),
              flush=True)
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
