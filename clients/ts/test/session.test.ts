// Session behaviour between two TS endpoints and against hand-written frames.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  ErrorCode,
  Flag,
  FrameType,
  Session,
  SessionError,
  StopSendingError,
  StreamResetError,
  encodeFrame,
  encodeHeaderBlock,
  encodeSettingsEntries,
  walkMessage,
  type Frame,
  type SessionOptions,
} from "../src/index.js";
import { MemWS, pair } from "./memws.js";

function sessions(co: SessionOptions = {}, so: SessionOptions = {}): [Session, Session, MemWS, MemWS] {
  const [a, b] = pair();
  return [new Session(a, true, { keepaliveMs: 0, ...co }), new Session(b, false, { keepaliveMs: 0, ...so }), a, b];
}

async function readAll(r: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of r as unknown as AsyncIterable<Uint8Array>) parts.push(c);
  return new Uint8Array(Buffer.concat(parts));
}

const f = (type: number, flags: number, streamId: number, arg: number, payload: Uint8Array = new Uint8Array(0)): Uint8Array =>
  encodeFrame({ type, flags, streamId, arg, payload }, { maxDataPayload: 65535, maxHeaderBytes: 65535 });
const cat = (...b: Uint8Array[]) => Uint8Array.from(Buffer.concat(b));
const settings = (e: Array<[number, number]> = []) => f(FrameType.SETTINGS, 0, 0, 0, encodeSettingsEntries(e));

/** A raw peer: a Session under test against frames the test writes and reads. */
function rawPeer(isClient: boolean, o: SessionOptions = {}) {
  const [a, b] = pair();
  const s = new Session(a, isClient, { keepaliveMs: 0, ...o });
  const got: Frame[] = [];
  let wake: (() => void) | null = null;
  b.addEventListener("message", (ev: { data: ArrayBuffer }) => {
    walkMessage(new Uint8Array(ev.data), { maxDataPayload: 65535, maxHeaderBytes: 65535 }, (fr) => got.push({ ...fr, payload: fr.payload.slice() }));
    wake?.();
  });
  const until = async (pred: (fr: Frame) => boolean): Promise<Frame> => {
    for (;;) {
      const i = got.findIndex(pred);
      if (i >= 0) return got.splice(i, 1)[0];
      await new Promise<void>((r) => (wake = r));
    }
  };
  return { s, ws: a, send: (...x: Uint8Array[]) => b.send(cat(...x)), until, got };
}

test("data both ways, half-close observed by the other side, sha256 intact", async () => {
  const [c, s] = sessions();
  const payload = Uint8Array.from({ length: 3 << 20 }, (_, i) => (i * 7) & 0xff);
  const want = createHash("sha256").update(payload).digest("hex");
  const st = await c.open({ "x-test": "1" });
  const acc = s.accept();
  const w = st.writable.getWriter();
  const wrote = (async () => {
    await w.write(payload);
    await w.close();
  })();
  const peer = await acc;
  assert.equal(peer.header("x-test"), "1");
  const got = await readAll(peer.readable);
  await wrote;
  assert.equal(createHash("sha256").update(got).digest("hex"), want);
  // The server half-closes after echoing; the client sees its FIN.
  const pw = peer.writable.getWriter();
  await pw.write(got.subarray(0, 1000));
  await pw.close();
  assert.equal((await readAll(st.readable)).length, 1000);
  await st.closed;
  await peer.closed;
  assert.equal(c.numStreams, 0);
  await c.close();
  assert.equal(await c.done, null);
});

test("a reader that stops reading stops the writer: backpressure is the window", async () => {
  const [c, s] = sessions({}, { initialStreamWindow: 65536 });
  const st = await c.open();
  const peer = await s.accept();
  const w = st.writable.getWriter();
  let written = 0;
  const writing = (async () => {
    for (let i = 0; i < 64; i++) {
      await w.write(new Uint8Array(16384));
      written += 16384;
    }
  })();
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  // Nothing read: the writer is held at the stream window (64 KiB).
  assert.ok(written <= 65536 + 16384, `wrote ${written} without credit`);
  assert.ok(peer.buffered <= 65536, `buffered ${peer.buffered}`);
  const rd = peer.readable.getReader();
  let n = 0;
  while (n < 64 * 16384) n += (await rd.read()).value!.length;
  await writing;
  assert.equal(written, 64 * 16384);
});

test("reset with a code is seen by the peer's reader and writer", async () => {
  const [c, s] = sessions();
  const st = await c.open();
  await st.writable.getWriter().write("before");
  const peer = await s.accept();
  const rd = peer.readable.getReader();
  assert.equal(Buffer.from((await rd.read()).value!).toString(), "before");
  st.reset(0x1234, "app gave up");
  await assert.rejects(rd.read(), (e: StreamResetError) => e instanceof StreamResetError && e.code === 0x1234 && e.remote);
  await assert.rejects(peer.closed, StreamResetError);
});

test("STOP_SENDING: the writer fails with the code, the peer gets FIN", async () => {
  const [c, s] = sessions();
  const st = await c.open();
  const w = st.writable.getWriter();
  await w.write("x");
  const peer = await s.accept();
  await peer.readable.cancel();
  await assert.rejects(
    (async () => {
      for (;;) await w.write(new Uint8Array(1000));
    })(),
    (e: StopSendingError) => e instanceof StopSendingError && e.code === ErrorCode.CANCEL,
  );
  // The client's other direction goes on.
  const pw = peer.writable.getWriter();
  await pw.write("still");
  await pw.close();
  assert.equal(Buffer.from(await readAll(st.readable)).toString(), "still");
});

test("PING measures an RTT; GOAWAY refuses new streams and drains", async () => {
  const [c, s] = sessions();
  const rtt = await c.ping();
  assert.ok(rtt >= 0);
  const st = await c.open();
  const peer = await s.accept();
  s.goAway();
  await new Promise((r) => setTimeout(r, 10));
  await assert.rejects(c.open(), (e: SessionError) => e.code === ErrorCode.REFUSED_STREAM);
  const w = st.writable.getWriter();
  await w.write("drain");
  await w.close();
  assert.equal(Buffer.from(await readAll(peer.readable)).toString(), "drain");
  await peer.writable.close();
  assert.equal(await s.done, null);
  assert.equal(await c.done, null);
});

test("stream credit: opens beyond MAX_STREAMS wait for a slot", async () => {
  const [c, s] = sessions({}, { initialMaxStreams: 2 });
  const a = await c.open(undefined, { fin: true });
  await c.open(undefined, { fin: true });
  let third = false;
  const p = c.open().then((st) => ((third = true), st));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(third, false);
  const pa = await s.accept();
  await pa.writable.close();
  await a.closed;
  await p;
  assert.equal(third, true);
});

// Every input limit: a raw peer crosses it and the session ends with the spec's code.
const limitCases: Array<[string, (id: number) => Uint8Array[], number]> = [
  ["DATA over the session window", (id) => [f(FrameType.HEADERS, Flag.SYN, id, 0), ...Array.from({ length: 65 }, () => f(FrameType.DATA, 0, id, 0, new Uint8Array(16384)))], ErrorCode.FLOW_CONTROL_ERROR],
  ["DATA over the stream window", (id) => [f(FrameType.HEADERS, Flag.SYN, id, 0), ...Array.from({ length: 17 }, () => f(FrameType.DATA, 0, id, 0, new Uint8Array(16384)))], ErrorCode.FLOW_CONTROL_ERROR],
  ["DATA over MAX_DATA_PAYLOAD", (id) => [f(FrameType.HEADERS, Flag.SYN, id, 0), f(FrameType.DATA, 0, id, 0, new Uint8Array(16385))], ErrorCode.FRAME_SIZE_ERROR],
  ["header block over MAX_HEADER_BYTES", (id) => [f(FrameType.HEADERS, Flag.SYN, id, 0, encodeHeaderBlock([["x", "v".repeat(4096)], ["y", "v".repeat(4096)]], 65535))], ErrorCode.HEADER_TOO_LARGE],
  ["SYN beyond the stream credit", (id) => [f(FrameType.HEADERS, Flag.SYN, id + 200, 0)], ErrorCode.STREAM_LIMIT_ERROR],
  ["SYN of the wrong parity", (id) => [f(FrameType.HEADERS, Flag.SYN, id - 1, 0)], ErrorCode.PROTOCOL_ERROR],
  ["SYN going backwards", (id) => [f(FrameType.HEADERS, Flag.SYN, id + 2, 0), f(FrameType.HEADERS, Flag.SYN, id, 0)], ErrorCode.PROTOCOL_ERROR],
  ["frame on an idle stream", (id) => [f(FrameType.WINDOW_UPDATE, 0, id + 10, 5)], ErrorCode.PROTOCOL_ERROR],
  ["second SETTINGS", () => [settings()], ErrorCode.PROTOCOL_ERROR],
  ["session credit over 2^31-1", () => [f(FrameType.WINDOW_UPDATE, 0, 0, 0x7fffffff)], ErrorCode.FLOW_CONTROL_ERROR],
  ["PING flood", () => Array.from({ length: 60 }, (_, i) => f(FrameType.PING, 0, 0, i)), ErrorCode.ENHANCE_YOUR_CALM],
  ["useless-frame flood", () => Array.from({ length: 1001 }, (_, i) => f(FrameType.PING, Flag.ACK, 0, i + 1000)), ErrorCode.ENHANCE_YOUR_CALM],
  ["SYNs past the backlog: refused slots come back only as streams are accepted (7.3)", (id) => Array.from({ length: 101 }, (_, i) => f(FrameType.HEADERS, Flag.SYN, id + 2 * i, 0)), ErrorCode.STREAM_LIMIT_ERROR],
  ["rapid reset", (id) => Array.from({ length: 201 }, (_, i) => [f(FrameType.HEADERS, Flag.SYN, id + 2 * i, 0), f(FrameType.RST_STREAM, 0, id + 2 * i, ErrorCode.CANCEL)]).flat(), ErrorCode.ENHANCE_YOUR_CALM],
];

for (const [name, frames, code] of limitCases) {
  test(`limit: ${name} ends the session with ${code}`, async () => {
    const p = rawPeer(true, { initialMaxStreams: name === "rapid reset" ? 1000 : 100 });
    p.send(settings());
    // The client's peer opens even ids.
    const msgs = frames(2);
    for (let i = 0; i < msgs.length; i += 64) p.send(...msgs.slice(i, i + 64));
    const ga = await p.until((fr) => fr.type === FrameType.GOAWAY);
    assert.equal(ga.arg, code);
    const err = await p.s.done;
    assert.ok(err instanceof SessionError);
    assert.equal(err.code, code);
    assert.ok(p.ws.closedWith !== null);
  });
}

test("limit: a first frame other than SETTINGS is PROTOCOL_ERROR; a text message closes with 1003", async () => {
  const p = rawPeer(false);
  p.send(f(FrameType.PING, 0, 0, 1));
  assert.equal((await p.until((fr) => fr.type === FrameType.GOAWAY)).arg, ErrorCode.PROTOCOL_ERROR);
  const q = rawPeer(false);
  q.ws.inject("text");
  await q.s.done;
  assert.equal(q.ws.closedWith, 1003);
});

test("limit: a message over MAX_MESSAGE_SIZE closes with 1009", async () => {
  const p = rawPeer(true, { maxMessageSize: 65536 });
  p.send(settings());
  p.send(...Array.from({ length: 6 }, () => f(FrameType.PING, Flag.ACK, 0, 9, new Uint8Array(0))), new Uint8Array(0));
  p.ws.inject(new Uint8Array(65537));
  const err = await p.s.done;
  assert.equal(err?.code, ErrorCode.PROTOCOL_ERROR);
  assert.equal(p.ws.closedWith, 1009);
});

test("limit: no SETTINGS within the settings timeout is SETTINGS_TIMEOUT", async () => {
  const p = rawPeer(true, { settingsTimeoutMs: 30 });
  assert.equal((await p.until((fr) => fr.type === FrameType.GOAWAY)).arg, ErrorCode.SETTINGS_TIMEOUT);
  assert.equal(p.ws.closedWith, 1001);
});

test("limit: data queued while the peer keeps the session window at zero is STALL_TIMEOUT", { timeout: 10000 }, async () => {
  let t = 0;
  const keep = setTimeout(() => {}, 5000); // the session's timer does not hold the event loop
  const p = rawPeer(true, { stallTimeoutMs: 60, keepaliveTimeoutMs: 0, now: () => t });
  p.send(settings([[4, 0]])); // INITIAL_SESSION_WINDOW 0
  const st = await p.s.open();
  const w = st.writable.getWriter();
  void w.write(new Uint8Array(20)).catch(() => {});
  await p.until((fr) => fr.type === FrameType.HEADERS);
  t = 50; // a session WINDOW_UPDATE restarts the stall clock; 10 bytes go
  p.send(f(FrameType.WINDOW_UPDATE, 0, 0, 10));
  assert.equal((await p.until((fr) => fr.type === FrameType.DATA)).payload.length, 10);
  t = 111; // 61 ms since that update, with 10 bytes still queued
  assert.equal((await p.until((fr) => fr.type === FrameType.GOAWAY)).arg, ErrorCode.STALL_TIMEOUT);
  assert.equal(p.ws.closedWith, 1001);
  clearTimeout(keep);
});

test("limit: a WebSocket whose send buffer takes nothing for the write timeout is STALL_TIMEOUT", { timeout: 10000 }, async () => {
  let t = 0;
  const keep = setTimeout(() => {}, 5000); // the session's timer does not hold the event loop
  const p = rawPeer(true, { writeTimeoutMs: 60, keepaliveTimeoutMs: 0, stallTimeoutMs: 0, now: () => t });
  p.send(settings());
  const ws = p.ws as unknown as { bufferedAmount: number };
  ws.bufferedAmount = 5000; // bytes the network never takes
  t = 50;
  ws.bufferedAmount = 4000; // some left: progress once a timer turn sees it
  t = 111; // then no progress
  assert.equal((await p.until((fr) => fr.type === FrameType.GOAWAY)).arg, ErrorCode.STALL_TIMEOUT);
  clearTimeout(keep);
});

test("limit: nothing received for the keepalive timeout is KEEPALIVE_TIMEOUT", async () => {
  const keep = setTimeout(() => {}, 5000); // the session's timer does not hold the event loop
  const p = rawPeer(true, { keepaliveTimeoutMs: 60 });
  p.send(settings());
  assert.equal((await p.until((fr) => fr.type === FrameType.GOAWAY)).arg, ErrorCode.KEEPALIVE_TIMEOUT);
  clearTimeout(keep);
});

test("the sender respects the peer's windows and MAX_DATA_PAYLOAD", async () => {
  const p = rawPeer(true);
  p.send(settings([[3, 5000], [1, 4096]]));
  const st = await p.s.open();
  const w = st.writable.getWriter();
  void w.write(new Uint8Array(20000));
  const syn = await p.until((fr) => fr.type === FrameType.HEADERS);
  assert.equal(syn.flags, Flag.SYN);
  let n = 0;
  while (n < 5000) {
    const d = await p.until((fr) => fr.type === FrameType.DATA);
    assert.ok(d.payload.length <= 4096);
    n += d.payload.length;
  }
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(p.got.filter((fr) => fr.type === FrameType.DATA).length, 0, "DATA beyond the stream window");
  p.send(f(FrameType.WINDOW_UPDATE, 0, st.id, 1000));
  assert.equal((await p.until((fr) => fr.type === FrameType.DATA)).payload.length, 1000);
});

test("DATA after FIN is a stream error STREAM_CLOSED, the session goes on", async () => {
  const p = rawPeer(true);
  p.send(settings(), f(FrameType.HEADERS, Flag.SYN | Flag.FIN, 2, 0), f(FrameType.DATA, 0, 2, 0, new Uint8Array(10)));
  const rst = await p.until((fr) => fr.type === FrameType.RST_STREAM);
  assert.equal(rst.streamId, 2);
  assert.equal(rst.arg, ErrorCode.STREAM_CLOSED);
  p.send(f(FrameType.PING, 0, 0, 77));
  assert.equal((await p.until((fr) => fr.type === FrameType.PING && (fr.flags & Flag.ACK) !== 0)).arg, 77);
});

test("GOAWAY: streams above its last-stream-id end with REFUSED_STREAM, those below go on", async () => {
  const p = rawPeer(true);
  p.send(settings());
  const a = await p.s.open();
  const b = await p.s.open();
  await p.until((fr) => fr.type === FrameType.HEADERS && fr.streamId === b.id);
  p.send(f(FrameType.GOAWAY, 0, a.id, ErrorCode.NO_ERROR));
  await assert.rejects(b.closed, (e: StreamResetError) => e.code === ErrorCode.REFUSED_STREAM && e.remote);
  // a goes on: its bytes still flow.
  const w = a.writable.getWriter();
  await w.write("still open");
  const d = await p.until((fr) => fr.type === FrameType.DATA && fr.streamId === a.id);
  assert.equal(Buffer.from(d.payload).toString(), "still open");
  await assert.rejects(p.s.open(), (e: SessionError) => e.code === ErrorCode.REFUSED_STREAM);
});

test("a stream the peer resets before it is accepted never reaches the application; its slot comes back", async () => {
  const p = rawPeer(true, { initialMaxStreams: 1 });
  p.send(settings(), f(FrameType.HEADERS, Flag.SYN, 2, 0), f(FrameType.RST_STREAM, 0, 2, ErrorCode.CANCEL));
  const ms = await p.until((fr) => fr.type === FrameType.MAX_STREAMS);
  assert.equal(ms.arg, 2);
  p.send(f(FrameType.HEADERS, Flag.SYN, 4, 0, encodeHeaderBlock([["n", "second"]])));
  const st = await p.s.accept();
  assert.equal(st.id, 4);
  assert.equal(st.header("n"), "second");
});

test("frames on closed streams are ignored, the session goes on", async () => {
  const p = rawPeer(true);
  p.send(settings(), f(FrameType.HEADERS, Flag.SYN | Flag.FIN, 2, 0));
  const st = await p.s.accept();
  await st.writable.close();
  await st.closed;
  p.send(
    f(FrameType.STOP_SENDING, 0, 2, ErrorCode.CANCEL),
    f(FrameType.WINDOW_UPDATE, 0, 2, 100),
    f(FrameType.RST_STREAM, 0, 2, ErrorCode.CANCEL),
    f(FrameType.DATA, 0, 2, 0, new Uint8Array(100)),
    f(FrameType.PING, 0, 0, 5),
  );
  assert.equal((await p.until((fr) => fr.type === FrameType.PING && (fr.flags & Flag.ACK) !== 0)).arg, 5);
  assert.equal(p.s.error, null);
});

for (const [name, step, grows] of [
  ["a reader that keeps up", 0, true],
  ["a reader slower than the RTT rule", 1000, false],
] as const) {
  test(`window auto-tuning: ${name} ${grows ? "grows its stream window up to maxStreamWindow" : "keeps the initial window"}`, async () => {
    let t = 0;
    const p = rawPeer(true, { initialStreamWindow: 64 << 10, maxStreamWindow: 1 << 20, now: () => t });
    p.send(settings());
    // The session measures an RTT first (10 ms on this clock).
    const ping = await p.until((fr) => fr.type === FrameType.PING && (fr.flags & Flag.ACK) === 0);
    t += 10;
    p.send(f(FrameType.PING, Flag.ACK, 0, ping.arg), f(FrameType.HEADERS, Flag.SYN, 2, 0));
    const st = await p.s.accept();
    const rd = st.readable.getReader();
    const total = 4 << 20;
    let streamLimit = 64 << 10, sessLimit = 1 << 20, sent = 0, read = 0, widest = 0;
    const credit = (fr: Frame) => {
      if (fr.streamId === 2) streamLimit += fr.arg;
      else sessLimit += fr.arg;
    };
    while (read < total) {
      while (sent < total && sent + 16384 <= Math.min(streamLimit, sessLimit)) {
        p.send(f(FrameType.DATA, 0, 2, 0, new Uint8Array(16384)));
        sent += 16384;
      }
      if (read < sent) {
        const { value } = await rd.read();
        read += value!.length;
        t += step;
      } else credit(await p.until((fr) => fr.type === FrameType.WINDOW_UPDATE));
      for (let i; (i = p.got.findIndex((fr) => fr.type === FrameType.WINDOW_UPDATE)) >= 0; ) credit(p.got.splice(i, 1)[0]);
      assert.ok(streamLimit - read <= 1 << 20, `stream credit ${streamLimit - read} above maxStreamWindow`);
      widest = Math.max(widest, streamLimit - read);
    }
    if (grows) assert.ok(widest > 512 << 10, `the stream window reached only ${widest} bytes`);
    else assert.ok(widest <= 64 << 10, `the stream window grew to ${widest} bytes`);
  });
}
