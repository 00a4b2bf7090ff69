// A WSMUX/1 server for `wsmux conformance --server ws://127.0.0.1:PORT/ --echo`:
// the TS Session in the server role over the ws package, echoing every stream
// the runner opens (half-closing after the runner's FIN). Upgrades that do not
// offer wsmux.v1 are refused with 400 (spec 2.1). Prints {"port": N} once
// listening; runs until killed.
//   node dist/test/tools/conformance-server.js
import { WebSocketServer } from "ws";
import { SUBPROTOCOL, Session, StopSendingError, Stream, type WebSocketLike } from "../../src/index.js";

async function echo(st: Stream): Promise<void> {
  const rd = st.readable.getReader();
  const w = st.writable.getWriter();
  try {
    for (;;) {
      const { value, done } = await rd.read();
      if (done) break;
      try {
        await w.write(value);
      } catch (e) {
        if (!(e instanceof StopSendingError)) throw e;
        // The runner stopped reading: keep reading its bytes until its FIN (--echo).
        while (!(await rd.read()).done);
        return;
      }
    }
    await w.close();
  } catch {
    // reset or the session's end: the stream is over either way
  }
}

const offers = (h: string | undefined) => (h ?? "").split(",").map((p) => p.trim());

const wss = new WebSocketServer({
  host: "127.0.0.1",
  port: 0,
  maxPayload: 1 << 20,
  perMessageDeflate: false,
  verifyClient: (info, cb) => {
    if (offers(info.req.headers["sec-websocket-protocol"]).includes(SUBPROTOCOL)) cb(true);
    else cb(false, 400, `offer the subprotocol ${SUBPROTOCOL}`);
  },
  handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
});
wss.on("connection", (ws) => {
  const s = new Session(ws as unknown as WebSocketLike, false);
  void (async () => {
    for await (const st of s) void echo(st);
  })();
});
wss.on("listening", () => {
  const a = wss.address();
  console.log(JSON.stringify({ port: a && typeof a === "object" ? a.port : 0 }));
});
