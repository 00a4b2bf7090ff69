// A WSMUX/1 client for `wsmux conformance --listen ADDR --echo`: it connects
// to ws://ADDR/, echoes every stream the runner opens (half-closing after the
// runner's FIN), and connects again each time a session ends, until a
// connection is refused or STOP_AFTER_MS passed.
//   node dist/test/tools/conformance-client.js ws://ADDR/
import { WebSocket } from "ws";
import { StopSendingError, Stream, connect, type WebSocketConstructor } from "../../src/index.js";

const url = process.argv[2];

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

async function main() {
  const deadline = Date.now() + Number(process.env.STOP_AFTER_MS ?? 300000);
  let refused = 0;
  while (Date.now() < deadline) {
    let s;
    try {
      s = await connect(url, { WebSocket: WebSocket as unknown as WebSocketConstructor, wsOptions: { maxPayload: 1 << 20 } });
    } catch {
      // The runner closed its listener (the run is over) or refused this one.
      if (++refused > 20) return;
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    refused = 0;
    for await (const st of s) void echo(st);
    await s.done;
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
