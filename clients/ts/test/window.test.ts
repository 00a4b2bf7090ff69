// The receive window's credit and growth rule (src/window.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { RecvWindow } from "../src/window.js";

test("window: credit goes back a quarter window at a time; without an RTT it never grows", () => {
  const w = new RecvWindow(64 << 10, 1 << 20);
  const deltas: number[] = [];
  for (let i = 0; i < 32; i++) deltas.push(w.consume(4 << 10, 0, 0));
  assert.deepEqual(deltas.filter((d) => d > 0), Array(8).fill(16 << 10));
  assert.equal(w.window, 64 << 10);
});

test("window: read in less than an RTT's worth of time it doubles, up to its maximum", () => {
  const w = new RecvWindow(64 << 10, 256 << 10);
  let granted = 64 << 10, read = 0;
  const sizes: number[] = [];
  for (let i = 0; i < 256; i++) {
    read += 8 << 10;
    granted += w.consume(8 << 10, i * 0.01, 10); // 2 MiB in 2.5 ms, RTT 10 ms
    sizes.push(w.window);
    assert.ok(granted - read <= w.window, `credit ${granted - read} above the window ${w.window}`);
  }
  assert.deepEqual([...new Set(sizes)], [64 << 10, 128 << 10, 256 << 10]);
  assert.ok(granted - read > (3 * w.window) / 4, `credit ${granted - read}: less than a quarter of the window may wait`);
});

test("window: a reader slower than the rule keeps the window where it is", () => {
  const w = new RecvWindow(64 << 10, 1 << 20);
  for (let i = 0; i < 256; i++) w.consume(8 << 10, i * 100, 10); // 8 KiB per 100 ms, RTT 10 ms
  assert.equal(w.window, 64 << 10);
});

test("window: raise grows to a floor (capped) and announces it at once", () => {
  const w = new RecvWindow(1 << 20, 4 << 20);
  assert.equal(w.raise(512 << 10), 0);
  assert.equal(w.raise(2 << 20), 1 << 20);
  assert.equal(w.raise(8 << 20), 2 << 20);
  assert.equal(w.window, 4 << 20);
});
