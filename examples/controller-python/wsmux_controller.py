"""Helpers for a controller in front of a wsmux gateway (standard library only).

A controller authenticates and authorizes a client itself, then lets
`wsmux gateway` carry the long-lived session, in one of two ways
(docs/controller.md):

- mint_ticket(): a one-time ticket (format v1, docs/spec/wsmux-ticket-v1.md)
  the client presents to the gateway (`--ticket-key FILE`);
- handoff(): pass the client's connected socket to the gateway
  (`--handoff-socket PATH`) with the caller's identity, the target and the
  bytes already read from the socket.

Python 3.9 or later (socket.send_fds).
"""

import base64
import hashlib
import hmac
import json
import os
import re
import socket
import time
from urllib.parse import parse_qs, urlsplit

TICKET_PREFIX = "wsmuxt1."
MAX_TICKET_LIFETIME = 60
MIN_KEY_SIZE = 32
HANDOFF_VERSION = 1
MAX_HANDOFF_MESSAGE = 128 << 10


def _b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def read_keys(path):
    """The keys of a ticket key file: one standard-base64 key per line
    (at least 32 bytes each); blank lines and # comments are skipped.
    A controller mints with the first."""
    keys = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            k = base64.b64decode(line, validate=True)
            if len(k) < MIN_KEY_SIZE:
                raise ValueError("%s:%d: a key of %d bytes: want at least %d" % (path, n, len(k), MIN_KEY_SIZE))
            keys.append(k)
    if not keys:
        raise ValueError("%s: no key" % path)
    return keys


def mint_ticket(key, user, namespace, pod, subresource, uid=None, groups=None,
                container=None, command=None, lifetime=30, now=None, nonce=None):
    """A ticket for `user` to open `subresource` (exec, attach, portforward)
    of pod `namespace`/`pod` once, within `lifetime` seconds (at most 60).
    `container` and `command`, when given, must match the client's request
    exactly; left out, the request may name any. `now` (Unix seconds) and
    `nonce` (base64url of at least 16 bytes) are for tests: by default the
    clock and 16 random bytes."""
    if len(key) < MIN_KEY_SIZE:
        raise ValueError("ticket key of %d bytes: want at least %d" % (len(key), MIN_KEY_SIZE))
    if not user or not namespace or not pod:
        raise ValueError("a ticket needs a user, a namespace and a pod")
    if subresource not in ("exec", "attach", "portforward"):
        raise ValueError("subresource %r: want exec, attach or portforward" % subresource)
    if command is not None and (not command or subresource != "exec"):
        raise ValueError("a command must be non-empty, for exec only")
    if not 0 < lifetime <= MAX_TICKET_LIFETIME:
        raise ValueError("lifetime %r: want 1 to %d seconds" % (lifetime, MAX_TICKET_LIFETIME))
    iat = int(time.time()) if now is None else int(now)
    claims = {"user": user, "namespace": namespace, "pod": pod, "subresource": subresource,
              "iat": iat, "exp": iat + int(lifetime),
              "nonce": nonce if nonce is not None else _b64url(os.urandom(16))}
    if uid:
        claims["uid"] = uid
    if groups:
        claims["groups"] = list(groups)
    if container:
        claims["container"] = container
    if command is not None:
        claims["command"] = list(command)
    return sign_claims(key, claims)


def sign_claims(key, claims):
    """Sign a claims dict as it is (no checks): the canonical JSON is
    json.dumps with sorted keys, no spaces and ASCII-only escapes."""
    payload = json.dumps(claims, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    signed = TICKET_PREFIX + _b64url(payload.encode("ascii"))
    mac = hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest()
    return signed + "." + _b64url(mac)


class HandoffError(Exception):
    """The gateway refused a handoff (reason: a wsmux_handoffs_total result,
    or "closed": it closed the connection without reading, as it does for a
    uid it does not allow). The client's socket is still the controller's."""

    def __init__(self, reason, message):
        super().__init__("wsmux gateway refused the handoff (%s): %s" % (reason, message))
        self.reason = reason


class HandoffUnanswered(Exception):
    """The handoff was sent and not answered (a timeout): the gateway may be
    serving the client, so the controller must only close its copy of the
    socket, never write to it."""


_POD_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/(exec|attach|portforward)$")


def target_from_request(request_target):
    """The target of a request for the Kubernetes paths, from its
    request-target (path and query: what wsmux exec and kubectl send), or
    None. A controller with URLs of its own builds the dict itself."""
    u = urlsplit(request_target)
    m = _POD_PATH.match(u.path)
    if not m:
        return None
    q = parse_qs(u.query)
    t = {"namespace": m.group(1), "pod": m.group(2), "subresource": m.group(3)}
    if q.get("container"):
        t["container"] = q["container"][0]
    if q.get("command"):
        t["command"] = q["command"]
    for k in ("stdin", "stdout", "stderr", "tty"):
        if q.get(k):
            t[k] = q[k][0].lower() in ("1", "true", "t")
    return t


def handoff(socket_path, client, user, target, data, remote_addr=None, timeout=10.0):
    """Pass `client` (a connected socket) to the gateway listening on
    `socket_path`: one SOCK_SEQPACKET message with the socket (SCM_RIGHTS)
    and the JSON {"v":1,"user":...,"target":...,"data":...}. `user` is a
    dict {"name", "uid", "groups"}; `target` a dict {"namespace", "pod",
    "subresource", "container", "command", "stdin", "stdout", "stderr",
    "tty"}; `data` the bytes already read from the client (the request head
    and whatever came after it). Raises HandoffError on a refusal. Either
    way, the caller then closes its copy of `client` with close(), never
    shutdown(): the socket is shared with the gateway. Raises
    HandoffUnanswered when the gateway did not answer: then do not write to
    `client` either."""
    msg = {"v": HANDOFF_VERSION, "user": user, "target": target,
           "data": base64.b64encode(data).decode("ascii")}
    if remote_addr:
        msg["remote_addr"] = remote_addr
    js = json.dumps(msg, separators=(",", ":")).encode("utf-8")
    if len(js) > MAX_HANDOFF_MESSAGE:
        raise ValueError("handoff message of %d bytes: at most %d" % (len(js), MAX_HANDOFF_MESSAGE))
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(timeout)
        s.connect(socket_path)
        try:
            socket.send_fds(s, [js], [client.fileno()])
            answer = s.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            answer = b""
        except socket.timeout as e:
            raise HandoffUnanswered("no answer from the gateway within %ss" % timeout) from e
    if not answer:
        raise HandoffError("closed", "the gateway closed the handoff socket (is this user allowed by --handoff-allow-uid?)")
    reply = json.loads(answer)
    if not reply.get("ok"):
        raise HandoffError(reply.get("reason", "?"), reply.get("error", ""))
