/**
 * The web-platform globals core uses. Every runtime it targets (Node ≥ 20,
 * Deno, Bun, browsers, workers) has them; they are declared here so that core
 * compiles without `@types/node` or the DOM library. Nothing exported from
 * core mentions them, so consumers never need these declarations.
 */
declare global {
  interface TextEncoder {
    encode(input?: string): Uint8Array
  }
  var TextEncoder: { new(): TextEncoder }
  interface TextDecoder {
    decode(input?: Uint8Array): string
  }
  var TextDecoder: {
    new(label?: string, options?: { readonly fatal?: boolean; readonly ignoreBOM?: boolean }): TextDecoder
  }
  var crypto: {
    randomUUID(): string
    getRandomValues<T extends ArrayBufferView>(array: T): T
    readonly subtle: {
      digest(algorithm: "SHA-256", data: Uint8Array): Promise<ArrayBuffer>
    }
  }
  function setTimeout(callback: () => void, delay?: number): unknown
  function clearTimeout(timer: unknown): void
  // absent outside Node, Deno and Bun
  var setImmediate: ((callback: () => void) => unknown) | undefined
  var clearImmediate: ((handle: unknown) => void) | undefined
}

export {}
