import { test } from "node:test";
import assert from "node:assert/strict";
import { forPlayer } from "../web/cast.js";

const header = (tty: boolean) => JSON.stringify({ version: 2, width: 80, height: 24, wsmux: { kind: "exec", tty } });

test("forPlayer: a terminal's cast plays as it is", () => {
  const cast = [header(true), '[0.1, "o", "a\\r\\nb"]', '[0.2, "r", "100x30"]', '[0.3, "m", "exit 0"]'].join("\n") + "\n";
  const parse = (s: string) => s.trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(parse(forPlayer(cast)), parse(cast));
});

test("forPlayer: without a terminal, stderr is red output and newlines return the carriage", () => {
  const cast = [header(false), '[0.1, "o", "out\\n"]', '[0.2, "e", "err\\n"]', '[0.3, "m", "exit 3"]'].join("\n");
  const lines = forPlayer(cast).trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(lines.slice(1), [
    [0.1, "o", "out\r\n"],
    [0.2, "o", "\x1b[31merr\r\n\x1b[39m"],
    [0.3, "m", "exit 3"],
  ]);
});

test("forPlayer: a line cut by a crash is skipped", () => {
  const cast = [header(true), '[0.1, "o", "whole"]', '[0.2, "o", "cu'].join("\n");
  assert.equal(forPlayer(cast).trim().split("\n").length, 2);
});
