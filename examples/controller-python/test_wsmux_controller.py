"""The Python minting helper against the shared vectors (testdata/tickets/v1.json).

    python3 examples/controller-python/test_wsmux_controller.py

(go test ./cmd/wsmux/... runs it too.)
"""

import base64
import json
import os
import sys
import unittest

sys.dont_write_bytecode = True  # leave no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wsmux_controller as wc  # noqa: E402

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "tickets", "v1.json")


class TicketVectors(unittest.TestCase):
    def setUp(self):
        with open(VECTORS, encoding="utf-8") as f:
            self.v = json.load(f)
        self.assertEqual(self.v["version"], 1)
        self.keys = {k: base64.b64decode(b) for k, b in self.v["keys"].items()}

    def test_mint(self):
        self.assertGreaterEqual(len(self.v["mint"]), 4)
        for m in self.v["mint"]:
            c = m["claims"]
            with self.subTest(m["name"]):
                got = wc.mint_ticket(self.keys[m["key"]], c["user"], c["namespace"], c["pod"], c["subresource"],
                                     uid=c.get("uid"), groups=c.get("groups"), container=c.get("container"),
                                     command=c.get("command"), lifetime=c["exp"] - c["iat"], now=c["iat"],
                                     nonce=c["nonce"]) if c["exp"] - c["iat"] <= 60 else wc.sign_claims(self.keys[m["key"]], c)
                self.assertEqual(got, m["ticket"])

    def test_refuses(self):
        k = self.keys["k1"]
        for kwargs in ({"key": k[:31]}, {"subresource": "log"}, {"lifetime": 61}, {"lifetime": 0},
                       {"command": []}, {"subresource": "attach", "command": ["sh"]}, {"user": ""}):
            args = {"key": k, "user": "a", "namespace": "n", "pod": "p", "subresource": "exec"}
            args.update(kwargs)
            with self.subTest(kwargs):
                with self.assertRaises(ValueError):
                    wc.mint_ticket(**args)

    def test_random_nonce(self):
        a = wc.mint_ticket(self.keys["k1"], "a", "n", "p", "exec", now=100)
        b = wc.mint_ticket(self.keys["k1"], "a", "n", "p", "exec", now=100)
        self.assertNotEqual(a, b)

    def test_target_from_request(self):
        t = wc.target_from_request("/api/v1/namespaces/default/pods/web-0/exec?command=sh&command=-c&command=ls&stdin=true&tty=false&container=app")
        self.assertEqual(t, {"namespace": "default", "pod": "web-0", "subresource": "exec", "container": "app",
                             "command": ["sh", "-c", "ls"], "stdin": True, "tty": False})
        self.assertIsNone(wc.target_from_request("/apps/x/run"))


if __name__ == "__main__":
    unittest.main()
