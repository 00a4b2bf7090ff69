// The rules of spec revision 2026-12-07 (docs/spec/wsmux-v1.md, Appendix C)
// that the TS client had guessed differently, each against a raw peer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ErrorCode, Flag, FrameType, SessionError } from "../src/index.js";
import { WindowBudget } from "../src/budget.js";
import { f, rawPeer, settings } from "./peer.js";

const ping = (arg: number) => f(FrameType.PING, 0, 0, arg);
const many = (n: number, fr: () => Uint8Array) => Array.from({ length: n }, fr);

/** Ends with ENHANCE_YOUR_CALM (want) or answers a PING (the session survived). */
async function calm(p: ReturnType<typeof rawPeer>, want: boolean): Promise<void> {
  if (want) {
    assert.equal((await p.until((fr) => fr.type === FrameType.GOAWAY)).arg, ErrorCode.ENHANCE_YOUR_CALM);
    return;
  }
  p.send(ping(0x7c0000ff));
  const ack = await p.until((fr) => fr.type === FrameType.GOAWAY || (fr.type === FrameType.PING && fr.arg === 0x7c0000ff));
  assert.equal(ack.type, FrameType.PING, `the session ended: GOAWAY ${ack.arg}`);
}

test("budget windows: the first begins at the session's start, not at the first event", () => {
  let t = 1_000_000;
  const b = new WindowBudget(200, 10_000, () => t);
  t += 9_000;
  for (let i = 0; i < 200; i++) assert.ok(b.hit(), `event ${i + 1} of 200`);
  t += 1_000; // 10 s after the start: a new window
  assert.ok(b.hit());
  for (let i = 1; i < 200; i++) assert.ok(b.hit());
  assert.equal(b.hit(), false, "the 201st of the second window trips");
});

for (const [n, trip] of [
  [50, false],
  [51, true],
] as const) {
  test(`PING bucket: ${n} PINGs in one message ${trip ? "trip it" : "are all answered"}`, async () => {
    let t = 0;
    const p = rawPeer(true, { now: () => t });
    p.send(settings(), ...Array.from({ length: n }, (_, i) => ping(i + 1)));
    if (trip) {
      await calm(p, true);
      return;
    }
    assert.equal((await p.until((fr) => fr.type === FrameType.PING && fr.arg === n)).flags, Flag.ACK);
    t += 100; // one token back
    await calm(p, false);
  });
}

// Frames that change nothing count toward the useless-frame budget: 1000 pass, the 1001st trips.
const useless: Array<[string, Uint8Array[], () => Uint8Array, number]> = [
  ["HEADERS after the peer's FIN", [f(FrameType.HEADERS, Flag.SYN | Flag.FIN, 2, 0)], () => f(FrameType.HEADERS, 0, 2, 0), 0],
  ["HEADERS with FIN after the peer's FIN", [f(FrameType.HEADERS, Flag.SYN | Flag.FIN, 2, 0)], () => f(FrameType.HEADERS, Flag.FIN, 2, 0), 0],
  ["MAX_STREAMS not above the credit", [], () => f(FrameType.MAX_STREAMS, 0, 0, 1), 0],
  ["GOAWAY that lowers nothing", [], () => f(FrameType.GOAWAY, 0, 1, ErrorCode.NO_ERROR), 1],
];
for (const [name, before, fr, extra] of useless) {
  for (const n of [1000, 1001]) {
    test(`useless frames: ${n} of ${name}`, async () => {
      const p = rawPeer(true);
      p.send(settings());
      if (name.startsWith("GOAWAY")) {
        const st = await p.s.open(); // stream 1 keeps the drain going
        assert.equal(st.id, 1);
      }
      p.send(...before, ...many(n + extra, fr));
      await calm(p, n > 1000);
      if (n > 1000) assert.ok((await p.s.done) instanceof SessionError);
    });
  }
}

// DATA: an idle stream first (PROTOCOL_ERROR), then the session window and the
// stream's (FLOW_CONTROL_ERROR), then DATA after FIN (STREAM_CLOSED): spec 7.5, 7.8, 8.3.
const data = (id: number, n: number, flags = 0) => f(FrameType.DATA, flags, id, 0, new Uint8Array(n));
for (const [name, frames, code] of [
  ["on an idle stream beyond the session window", [f(FrameType.HEADERS, Flag.SYN, 2, 0), ...many(2, () => data(2, 16384)), f(FrameType.HEADERS, Flag.SYN, 4, 0), ...many(2, () => data(4, 16384)), data(100, 1)], ErrorCode.PROTOCOL_ERROR],
  ["after FIN beyond the stream window", [f(FrameType.HEADERS, Flag.SYN, 2, 0), ...many(2, () => data(2, 16384)), data(2, 0, Flag.FIN), data(2, 1)], ErrorCode.FLOW_CONTROL_ERROR],
] as const) {
  test(`DATA ${name} is ${code === ErrorCode.PROTOCOL_ERROR ? "PROTOCOL_ERROR" : "FLOW_CONTROL_ERROR"}`, async () => {
    const p = rawPeer(true, { initialSessionWindow: 65536, initialStreamWindow: 32768, maxSessionWindow: 65536, maxStreamWindow: 32768 });
    p.send(settings(), ...frames);
    assert.equal((await p.until((fr) => fr.type === FrameType.GOAWAY)).arg, code);
  });
}

test("GOAWAY with a code other than NO_ERROR ends the session at once, with no frame of ours and the code's close status", async () => {
  const p = rawPeer(true);
  p.send(settings());
  const st = await p.s.open(); // stream 1, at the last-stream-id: not drained either
  await p.until((fr) => fr.type === FrameType.HEADERS);
  const before = p.all.length;
  p.send(f(FrameType.GOAWAY, 0, st.id, ErrorCode.INTERNAL_ERROR));
  const err = await p.s.done;
  assert.ok(err instanceof SessionError && err.code === ErrorCode.INTERNAL_ERROR && err.remote);
  await assert.rejects(st.closed);
  await new Promise((r) => setImmediate(r));
  assert.equal(p.all.length, before, "no frame after the peer's error GOAWAY");
  assert.equal(p.ws.closedWith, 1011);
});

test("a drain ends with a close 1000 and no GOAWAY of ours; streams above the last-stream-id end without RST_STREAM", async () => {
  const p = rawPeer(true);
  p.send(settings());
  const a = await p.s.open();
  const b = await p.s.open();
  await p.until((fr) => fr.type === FrameType.HEADERS && fr.streamId === b.id);
  p.send(f(FrameType.GOAWAY, 0, a.id, ErrorCode.NO_ERROR), f(FrameType.HEADERS, Flag.ACK | Flag.FIN, a.id, 0));
  await assert.rejects(b.closed, (e: { code: number }) => e.code === ErrorCode.REFUSED_STREAM);
  await a.writable.close();
  assert.equal(await p.s.done, null);
  await new Promise((r) => setImmediate(r));
  assert.ok(!p.all.some((fr) => fr.type === FrameType.RST_STREAM || fr.type === FrameType.GOAWAY), "no RST_STREAM, no GOAWAY");
  assert.equal(p.ws.closedWith, 1000);
});

test("a PING that comes with the peer's SETTINGS is answered after our SETTINGS, which come first", async () => {
  for (const isClient of [true, false]) {
    const p = rawPeer(isClient);
    p.send(settings(), ping(42));
    await p.until((fr) => fr.type === FrameType.PING && fr.arg === 42 && fr.flags === Flag.ACK);
    assert.equal(p.all[0].type, FrameType.SETTINGS);
    assert.equal(p.all.filter((fr) => fr.type === FrameType.SETTINGS).length, 1);
  }
});
