// @wsmux/client: WSMUX/1 (docs/spec/wsmux-v1.md) for browsers and Node, over
// the standard WebSocket API, with WHATWG streams whose backpressure is the
// protocol's flow control. No runtime dependencies.

export * from "./errors.js";
export * from "./frame.js";
export { Session } from "./session.js";
export { SUBPROTOCOL } from "./options.js";
export type { SessionOptions, WebSocketLike } from "./options.js";
export { Stream } from "./stream.js";
export { connect, ConnectError, bearerProtocol, base64url } from "./connect.js";
export type { ConnectOptions, WebSocketConstructor } from "./connect.js";
export * from "./k8s.js";
