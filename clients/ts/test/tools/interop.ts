// The TS side of the Go interop test (internal/tsinterop): run as
//   node dist/test/tools/interop.js ws://HOST:PORT/ STREAMS BYTES
// It opens STREAMS streams and on each sends BYTES of the shared pattern then
// FIN, while reading the Go server's BYTES and checking their sha256; then it
// resets one stream with code 0x1234 and sees a STOP_SENDING from Go fail its
// writer. Prints one JSON line with the results; exit 0 when all passed.
import { createHash } from "node:crypto";
import { WebSocket } from "ws";
import { ErrorCode, StopSendingError, connect, type WebSocketConstructor } from "../../src/index.js";
import { patternBlock } from "./pattern.js";

const [url, nStr, sizeStr] = process.argv.slice(2);
const n = Number(nStr ?? 64);
const size = Number(sizeStr ?? 4 << 20);

function expectedHash(k: number): string {
  const h = createHash("sha256");
  const blk = patternBlock(k);
  for (let off = 0; off < size; off += blk.length) h.update(blk.subarray(0, Math.min(blk.length, size - off)));
  return h.digest("hex");
}

async function main() {
  const t0 = performance.now();
  const s = await connect(url, {
    WebSocket: WebSocket as unknown as WebSocketConstructor,
    wsOptions: { maxPayload: 1 << 20 },
    initialStreamWindow: 1 << 20,
    initialSessionWindow: 16 << 20,
  });
  const results = await Promise.all(
    Array.from({ length: n }, async (_, k) => {
      const st = await s.open({ "x-interop": "data", "x-stream": String(k) });
      const send = (async () => {
        const w = st.writable.getWriter();
        const blk = patternBlock(k);
        for (let off = 0; off < size; off += blk.length) await w.write(blk.subarray(0, Math.min(blk.length, size - off)));
        await w.close();
      })();
      const h = createHash("sha256");
      let got = 0;
      for await (const c of st.readable as unknown as AsyncIterable<Uint8Array>) {
        h.update(c);
        got += c.length;
      }
      await send;
      const ok = got === size && h.digest("hex") === expectedHash(k);
      return { k, got, ok };
    }),
  );
  const mibps = ((2 * n * size) / 1048576 / ((performance.now() - t0) / 1000)).toFixed(1);

  // A reset the Go side must observe with its code, after the bytes before it.
  const r = await s.open({ "x-interop": "reset" });
  const rw = r.writable.getWriter();
  await rw.write(new TextEncoder().encode("before-reset"));
  r.reset(0x1234, "interop reset");

  // Go calls CloseRead: STOP_SENDING, so our writes fail with its code.
  const st = await s.open({ "x-interop": "stop" });
  const sw = st.writable.getWriter();
  let stopCode = -1;
  try {
    for (let i = 0; i < 1000; i++) await sw.write(new Uint8Array(16384));
  } catch (e) {
    if (e instanceof StopSendingError) stopCode = e.code;
  }
  const rtt = await s.ping();
  await s.close();
  const ok = results.every((x) => x.ok) && stopCode === ErrorCode.CANCEL;
  console.log(JSON.stringify({ ok, streams: n, bytes: size, mibps, stopCode, rttMs: rtt, failed: results.filter((x) => !x.ok) }));
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.log(JSON.stringify({ ok: false, error: String(e?.stack ?? e) }));
  process.exit(1);
});
