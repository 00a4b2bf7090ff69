// The codec against the language-neutral vectors of testdata/vectors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  ErrorCode,
  Flag,
  FrameType,
  ProtocolViolation,
  decodeFrame,
  decodeHeaderBlock,
  encodeFrame,
  encodeHeaderBlock,
  settingsEntries,
  walkMessage,
  type Frame,
} from "../src/index.js";

const root = new URL("../../../../testdata/vectors/", import.meta.url);
const load = (name: string) => JSON.parse(readFileSync(new URL(name, root), "utf8"));
const hex = (s: string) => Uint8Array.from(Buffer.from(s, "hex"));
const toHex = (b: Uint8Array) => Buffer.from(b).toString("hex");

const frames = load("frames.json");
const headers = load("headers.json");
const limits = { maxDataPayload: frames.limits.max_data_payload, maxHeaderBytes: frames.limits.max_header_bytes };
const flagBits: Record<string, number> = Flag;

function codeOf(e: unknown): number {
  assert.ok(e instanceof ProtocolViolation, `want a ProtocolViolation, got ${e}`);
  return e.code;
}

for (const v of frames.valid) {
  test(`frames.json valid ${v.name}`, () => {
    const f = decodeFrame(hex(v.hex), limits);
    assert.equal(f.type, FrameType[v.type as keyof typeof FrameType]);
    assert.equal(f.flags, v.flags.reduce((a: number, n: string) => a | flagBits[n], 0));
    assert.equal(f.streamId, v.stream_id);
    assert.equal(f.arg, v.arg);
    assert.equal(f.payload.length, v.length);
    assert.equal(toHex(f.payload), v.payload_hex);
    if (v.headers) assert.deepEqual(decodeHeaderBlock(f.payload, limits.maxHeaderBytes), v.headers);
    if (v.settings) assert.deepEqual(settingsEntries(f.payload), v.settings);
    // Encoding the decoded fields gives the same bytes.
    assert.equal(toHex(encodeFrame(f, limits)), v.hex);
    if (v.headers) assert.equal(toHex(encodeHeaderBlock(v.headers, limits.maxHeaderBytes)), v.payload_hex);
  });
}

for (const v of frames.invalid) {
  test(`frames.json invalid ${v.name}: ${v.error}`, () => {
    let err: unknown;
    try {
      decodeFrame(hex(v.hex), limits);
    } catch (e) {
      err = e;
    }
    assert.equal(codeOf(err), v.code, `${v.rule}: ${err}`);
    assert.equal((err as ProtocolViolation).codeName, v.error);
  });
}

for (const v of frames.messages) {
  test(`frames.json message ${v.name}`, () => {
    const got: Frame[] = [];
    let err: unknown = null;
    try {
      walkMessage(hex(v.hex), limits, (f) => got.push(f));
    } catch (e) {
      err = e;
    }
    assert.equal(got.length, v.frames);
    if (v.error) assert.equal(codeOf(err), v.code);
    else assert.equal(err, null);
  });
}

for (const v of headers.valid) {
  test(`headers.json valid ${v.name}`, () => {
    assert.deepEqual(decodeHeaderBlock(hex(v.hex), headers.limits.max_header_bytes), v.fields);
    assert.equal(toHex(encodeHeaderBlock(v.fields, headers.limits.max_header_bytes)), v.hex);
  });
}

for (const v of headers.invalid) {
  test(`headers.json invalid ${v.name}: ${v.error}`, () => {
    let err: unknown;
    try {
      decodeHeaderBlock(hex(v.hex), headers.limits.max_header_bytes);
    } catch (e) {
      err = e;
    }
    assert.equal(codeOf(err), v.code, v.rule);
  });
}

test("the encoder refuses what a receiver would reject", () => {
  const bad: Array<[Frame, number]> = [
    [{ type: FrameType.DATA, flags: 0, streamId: 1, arg: 0, payload: new Uint8Array(0) }, ErrorCode.PROTOCOL_ERROR],
    [{ type: FrameType.DATA, flags: 0, streamId: 1, arg: 0, payload: new Uint8Array(16385) }, ErrorCode.FRAME_SIZE_ERROR],
    [{ type: FrameType.PING, flags: 0, streamId: 3, arg: 0, payload: new Uint8Array(0) }, ErrorCode.PROTOCOL_ERROR],
    [{ type: FrameType.RST_STREAM, flags: 0, streamId: 1, arg: 8, payload: new Uint8Array(129) }, ErrorCode.FRAME_SIZE_ERROR],
    [{ type: FrameType.HEADERS, flags: Flag.SYN | Flag.ACK, streamId: 1, arg: 0, payload: new Uint8Array(0) }, ErrorCode.PROTOCOL_ERROR],
  ];
  for (const [f, code] of bad) assert.throws(() => encodeFrame(f), (e: { code: number }) => e.code === code);
  assert.throws(() => encodeHeaderBlock([["Upper", "x"]]), (e: { code: number }) => e.code === ErrorCode.PROTOCOL_ERROR);
  assert.throws(() => encodeHeaderBlock([["x", "a\r\nb"]]), (e: { code: number }) => e.code === ErrorCode.PROTOCOL_ERROR);
  assert.throws(() => encodeHeaderBlock([["x", "v".repeat(4097)]]), (e: { code: number }) => e.code === ErrorCode.HEADER_TOO_LARGE);
});
