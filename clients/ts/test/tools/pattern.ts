// The byte pattern of interop stream k at offset i, shared with the Go side
// (internal/tsinterop): (i mod 251 + 7k) mod 256.

/** A block of the pattern for stream k starting at offset 0; its length is a multiple of 251. */
export function patternBlock(k: number, size = 251 * 256): Uint8Array {
  const b = new Uint8Array(size);
  for (let i = 0; i < size; i++) b[i] = (i % 251 + 7 * k) & 0xff;
  return b;
}
