// A raw peer for session tests: a Session under test on one end of an
// in-memory pair, frames the test writes and reads on the other.
import { Session, encodeFrame, encodeSettingsEntries, walkMessage, FrameType, type Frame, type SessionOptions } from "../src/index.js";
import { pair } from "./memws.js";

/** A frame, any frame the codec can encode (limits opened wide). */
export const f = (type: number, flags: number, streamId: number, arg: number, payload: Uint8Array = new Uint8Array(0)): Uint8Array =>
  encodeFrame({ type, flags, streamId, arg, payload }, { maxDataPayload: 65535, maxHeaderBytes: 65535 });
export const cat = (...b: Uint8Array[]) => Uint8Array.from(Buffer.concat(b));
export const settings = (e: Array<[number, number]> = []) => f(FrameType.SETTINGS, 0, 0, 0, encodeSettingsEntries(e));

/** A Session (isClient) under test, and the frames it sends as got and until(). */
export function rawPeer(isClient: boolean, o: SessionOptions = {}) {
  const [a, b] = pair();
  const s = new Session(a, isClient, { keepaliveMs: 0, ...o });
  const got: Frame[] = [];
  const all: Frame[] = [];
  let wake: (() => void) | null = null;
  b.addEventListener("message", (ev: { data: ArrayBuffer }) => {
    walkMessage(new Uint8Array(ev.data), { maxDataPayload: 65535, maxHeaderBytes: 65535 }, (fr) => {
      const c = { ...fr, payload: fr.payload.slice() };
      got.push(c);
      all.push(c);
    });
    wake?.();
  });
  const until = async (pred: (fr: Frame) => boolean): Promise<Frame> => {
    for (;;) {
      const i = got.findIndex(pred);
      if (i >= 0) return got.splice(i, 1)[0];
      await new Promise<void>((r) => (wake = r));
    }
  };
  return { s, ws: a, peerWs: b, send: (...x: Uint8Array[]) => b.send(cat(...x)), until, got, all };
}
