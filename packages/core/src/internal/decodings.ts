/**
 * The texts a text holds under layers of encoding, each mapped back to where
 * it stands: a credential percent-encoded three times, or base64 of its
 * percent-encoding, is found by decoding, not by listing every composition.
 *
 * Two decodings, applied in any order to a bounded depth:
 *
 * - **escapes**, in one pass: percent-escapes to any depth (`%41`, `%2541`,
 *   `%252541`, upper or lower case hex, UTF-8 sequences), HTML entities to
 *   any depth (`&lt;`, `&amp;lt;`, `&#60;`, `&#x3C;`), and one level of
 *   string escapes (`\u0073`, `\u{73}`, `\"`, `\\`, `\/`, `\x73`, `\n`; a run
 *   of `\x` bytes that make UTF-8, `\xc3\xa9`, as its characters).
 *   That pass reads every escape-like stretch as an escape, so where it mixed
 *   kinds or went deeper than one level, each kind alone, and each kind one
 *   level, are decoded as well: a text that holds `\`, `%41` or `&quot;` as
 *   itself, encoded in layers, comes back as it was along one of the paths;
 * - **base64** (standard or URL-safe, with or without padding, at any of the
 *   four alignments): a run of 11 base64 characters or more whose bytes hold
 *   a stretch of at least 8 characters of text (printable ASCII or valid
 *   UTF-8) is read as that text.
 *
 * A text is decoded again only while a decoding changes it, at most
 * {@link depth} times along a path, and the texts made in all cost at most
 * {@link budget} characters: no input (a megabyte of `%25%25…`) takes long.
 *
 * The texts to find in them (`Literals`) are found at every position, so
 * that two that overlap are both found: by one pattern when they are few, by
 * a tree of their 8-character pieces when they are many (a pattern of
 * thousands takes seconds to compile).
 */

/** How many decodings a path applies at most. */
const depth = 6

/** The characters the decoded texts of one text may hold in all: a multiple of its length, and a floor. */
const budget = (length: number): number => 8 * length + 65_536

/** A text decoded from its source: each piece of it comes from a range of its source's characters. */
interface Layer {
  readonly text: string
  readonly source: Layer | undefined
  /** Where each piece starts in `text`, ascending. */
  readonly at: ReadonlyArray<number>
  /** The range of the source's characters each piece comes from. */
  readonly from: ReadonlyArray<number>
  readonly to: ReadonlyArray<number>
  /** Whether the piece is copied (its characters one for one) or decoded (every character from the whole range). */
  readonly copied: ReadonlyArray<boolean>
}

interface Builder {
  readonly parts: Array<string>
  length: number
  readonly at: Array<number>
  readonly from: Array<number>
  readonly to: Array<number>
  readonly copied: Array<boolean>
}

const builder = (): Builder => ({ parts: [], length: 0, at: [], from: [], to: [], copied: [] })

const piece = (b: Builder, text: string, from: number, to: number, copied: boolean) => {
  if (text.length === 0) return
  b.parts.push(text)
  const last = b.at.length - 1
  if (last >= 0 && b.copied[last] === copied && b.to[last] === from) {
    // copied next to copied, or decoded next to decoded (`%e6%97%a5%e6%9c%ac`, `\\\\`: one piece from the
    // escapes of both)
    b.to[last] = to
    b.length += text.length
    return
  }
  b.at.push(b.length)
  b.from.push(from)
  b.to.push(to)
  b.copied.push(copied)
  b.length += text.length
}

const copy = (b: Builder, source: string, from: number, to: number) => {
  if (to > from) piece(b, source.slice(from, to), from, to, true)
}

const layerOf = (b: Builder, source: Layer): Layer => ({
  text: b.parts.join(""),
  source,
  at: b.at,
  from: b.from,
  to: b.to,
  copied: b.copied
})

/** The piece of `layer` that holds its character `index`. */
const pieceAt = (layer: Layer, index: number): number => {
  let low = 0
  let high = layer.at.length - 1
  while (low < high) {
    const middle = (low + high + 1) >> 1
    if (layer.at[middle]! <= index) low = middle
    else high = middle - 1
  }
  return low
}

/** The range of the original text that the characters `start` to `end` of `layer` come from. */
const originalRange = (layer: Layer, start: number, end: number): readonly [number, number] => {
  let from = start
  let to = end
  for (let current = layer; current.source !== undefined; current = current.source) {
    const first = pieceAt(current, from)
    const last = pieceAt(current, to - 1)
    let low = Infinity
    let high = -Infinity
    for (let k = first; k <= last; k++) {
      const at = current.at[k]!
      const pieceStart = current.copied[k] ? current.from[k]! + Math.max(from, at) - at : current.from[k]!
      const pieceEnd = current.copied[k]
        ? current.from[k]! + Math.min(to, current.at[k + 1] ?? Infinity) - at
        : current.to[k]!
      low = Math.min(low, pieceStart)
      high = Math.max(high, pieceEnd)
    }
    from = low
    to = high
  }
  return [from, to]
}

// ---------------------------------------------------------------------------
// bytes as text
// ---------------------------------------------------------------------------

/** The length of the UTF-8 sequence of a character (printable, or a tab or line break) at `i`, or 0. */
const characterAt = (bytes: Uint8Array, i: number, end: number): number => {
  const lead = bytes[i]!
  if (lead < 0x80) return (lead >= 0x20 && lead < 0x7f) || lead === 0x09 || lead === 0x0a || lead === 0x0d ? 1 : 0
  const length = lead >= 0xc2 && lead <= 0xdf
    ? 2
    : lead >= 0xe0 && lead <= 0xef
    ? 3
    : lead >= 0xf0 && lead <= 0xf4
    ? 4
    : 0
  if (length === 0 || i + length > end) return 0
  for (let k = 1; k < length; k++) if ((bytes[i + k]! & 0xc0) !== 0x80) return 0
  // no overlong forms, no surrogates, nothing past U+10FFFF
  const second = bytes[i + 1]!
  if (lead === 0xe0 && second < 0xa0) return 0
  if (lead === 0xed && second >= 0xa0) return 0
  if (lead === 0xf0 && second < 0x90) return 0
  if (lead === 0xf4 && second >= 0x90) return 0
  return length
}

/** The character of the UTF-8 sequence of `length` bytes at `i` (see `characterAt`). */
const decodeCharacter = (bytes: Uint8Array, i: number, length: number): string => {
  if (length === 1) return String.fromCharCode(bytes[i]!)
  let code = bytes[i]! & (0xff >> (length + 1))
  for (let k = 1; k < length; k++) code = (code << 6) | (bytes[i + k]! & 0x3f)
  return String.fromCodePoint(code)
}

// ---------------------------------------------------------------------------
// escapes
// ---------------------------------------------------------------------------

// an HTML entity, its `&` escaped any number of times (`&amp;amp;lt;`), or once
// (a number may have any number of leading zeros: `&#0000115;`)
const entity = /&(?:amp;)*(?:#0*[0-9]{1,7}|#[xX]0*[0-9A-Fa-f]{1,6}|[A-Za-z]{2,16});/y
const entityOnce = /&(?:#0*[0-9]{1,7}|#[xX]0*[0-9A-Fa-f]{1,6}|[A-Za-z]{2,16});/y

/** The kinds of escapes (bits), and the pass that reads them. */
const percent = 1
const htmlEntity = 2
const stringEscape = 4
const everyKind = percent | htmlEntity | stringEscape

/** What one escape pass reads: which kinds, each to any depth or one level; what it found. */
interface Pass {
  readonly kinds: number
  readonly oneLevel: boolean
  /** The kinds it decoded, and whether it went deeper than one level (`%2541`, `&amp;lt;`). */
  found: number
  deep: boolean
}

const entities: Record<string, string> = {
  AMP: "&",
  LT: "<",
  GT: ">",
  QUOT: "\"",
  amp: "&",
  lt: "<",
  gt: ">",
  quot: "\"",
  apos: "'",
  nbsp: "\u00a0",
  sol: "/",
  colon: ":",
  equals: "=",
  plus: "+",
  percnt: "%",
  num: "#",
  excl: "!",
  quest: "?",
  lowbar: "_",
  period: ".",
  comma: ",",
  semi: ";",
  bsol: "\\",
  grave: "`",
  lpar: "(",
  rpar: ")",
  ast: "*",
  tilde: "~",
  commat: "@",
  dollar: "$",
  Tab: "\t",
  NewLine: "\n",
  // the other names HTML gives printable ASCII characters
  midast: "*",
  lsqb: "[",
  lbrack: "[",
  rsqb: "]",
  rbrack: "]",
  lcub: "{",
  lbrace: "{",
  rcub: "}",
  rbrace: "}",
  verbar: "|",
  vert: "|",
  VerticalLine: "|",
  Hat: "^",
  UnderBar: "_",
  DiacriticalGrave: "`",
  NonBreakingSpace: "\u00a0"
}

const stringEscapes: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", v: "\v", "0": "\0" }

const utf8 = new TextDecoder("utf-8")

const isHex = (code: number): boolean =>
  (code >= 48 && code <= 57) || (code >= 65 && code <= 70) || (code >= 97 && code <= 102)

const hexAt = (source: string, at: number, digits: number): number | undefined => {
  for (let k = 0; k < digits; k++) if (!isHex(source.charCodeAt(at + k))) return undefined
  return parseInt(source.slice(at, at + digits), 16)
}

/**
 * The run of percent-escapes at `start` decoded (`%`, any number of `25`,
 * then a byte: the last `25` is the byte when no other follows; one `%`
 * and a byte in a one-level pass), each
 * character (a UTF-8 sequence, or a byte alone) from its escapes; where the
 * run ends (`start` when there is none).
 */
const percentRun = (b: Builder, source: string, start: number, pass: Pass): number => {
  const bytes: Array<number> = []
  const starts: Array<number> = []
  let i = start
  while (source.charCodeAt(i) === 37) {
    let j = i + 1
    if (!pass.oneLevel) { while (source.charCodeAt(j) === 50 && source.charCodeAt(j + 1) === 53) j += 2 }
    const byte = hexAt(source, j, 2)
    if (j > i + 1) pass.deep = true
    if (byte !== undefined) {
      bytes.push(byte)
      starts.push(i)
      i = j + 2
    } else if (j > i + 1) {
      bytes.push(0x25)
      starts.push(i)
      i = j
    } else {
      break
    }
  }
  starts.push(i)
  bytePieces(b, bytes, starts)
  return i
}

/**
 * The escaped bytes decoded, each character (a UTF-8 sequence, or a byte
 * alone, as Latin-1 reads it) from the escapes of its bytes (`starts`: where
 * each escape starts, then where the last ends).
 */
const bytePieces = (b: Builder, bytes: ReadonlyArray<number>, starts: ReadonlyArray<number>): void => {
  const array = Uint8Array.from(bytes)
  for (let k = 0; k < array.length;) {
    const taken = Math.max(characterAt(array, k, array.length), 1)
    piece(b, decodeCharacter(array, k, taken), starts[k]!, starts[k + taken]!, false)
    k += taken
  }
}

/** The entity at `start` decoded; where it ends (`start` when there is none, or it names nothing known). */
const entityAt = (b: Builder, source: string, start: number, pass: Pass): number => {
  const pattern = pass.oneLevel ? entityOnce : entity
  pattern.lastIndex = start
  const match = pattern.exec(source)
  if (match === null) return start
  // the name after the last of the escaped `&`s
  const cut = match[0].lastIndexOf(";", match[0].length - 2)
  const name = match[0].slice(cut < 0 ? 1 : cut + 1, -1)
  const code = name.startsWith("#")
    ? name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10)
    : undefined
  const text = code === undefined
    ? entities[name]
    // (a surrogate too: an encoder that writes each UTF-16 unit, `&#55357;&#56593;`, writes an astral character so)
    : code <= 0x10ffff
    ? String.fromCodePoint(code)
    : undefined
  if (text === undefined) return start
  if (cut >= 0) pass.deep = true
  piece(b, text, start, pattern.lastIndex, false)
  return pattern.lastIndex
}

const braces = /\{0*([0-9A-Fa-f]{1,6})\}/y

/**
 * The run of `\x` escapes at `start` decoded: bytes that make a UTF-8
 * sequence as the character (`\xc3\xa9`, as Python writes bytes), any other
 * as the character of its code (`\xe9`, as JavaScript reads it); where the
 * run ends (`start` when there is none).
 */
const hexRun = (b: Builder, source: string, start: number): number => {
  const bytes: Array<number> = []
  const starts: Array<number> = []
  let i = start
  while (source.charCodeAt(i) === 92 && source.charCodeAt(i + 1) === 120) {
    const byte = hexAt(source, i + 2, 2)
    if (byte === undefined) break
    bytes.push(byte)
    starts.push(i)
    i += 4
  }
  starts.push(i)
  bytePieces(b, bytes, starts)
  return i
}

/** The string escape at `start` (`\u0073`, `\u{73}`, `\x73`, `\"`, `\n`) decoded, one level; where it ends. */
const stringEscapeAt = (b: Builder, source: string, start: number): number => {
  if (start + 1 >= source.length) return start
  const kind = source[start + 1]!
  if (kind === "x" && hexAt(source, start + 2, 2) !== undefined) return hexRun(b, source, start)
  const unit = kind === "u" ? hexAt(source, start + 2, 4) : undefined
  if (unit !== undefined) {
    piece(b, String.fromCharCode(unit), start, start + 6, false)
    return start + 6
  }
  // a code point in braces, as JavaScript writes it: `\u{1F511}`, `\u{0000073}`
  braces.lastIndex = start + 2
  const braced = kind === "u" ? braces.exec(source) : null
  const point = braced === null ? undefined : parseInt(braced[1]!, 16)
  if (point !== undefined && point <= 0x10ffff) {
    piece(b, String.fromCodePoint(point), start, braces.lastIndex, false)
    return braces.lastIndex
  }
  piece(b, stringEscapes[kind] ?? kind, start, start + 2, false)
  return start + 2
}

/** The text with the escapes `pass` reads decoded, or `undefined` when it holds none. */
const unescapeLayer = (layer: Layer, pass: Pass): Layer | undefined => {
  const source = layer.text
  const b = builder()
  let last = 0
  for (let i = 0; i < source.length; i++) {
    const code = source.charCodeAt(i)
    const kind = code === 37 ? percent : code === 38 ? htmlEntity : code === 92 ? stringEscape : 0
    if ((kind & pass.kinds) === 0) continue
    copy(b, source, last, i)
    last = i
    const end = kind === percent
      ? percentRun(b, source, i, pass)
      : kind === htmlEntity
      ? entityAt(b, source, i, pass)
      : stringEscapeAt(b, source, i)
    if (end === i) continue
    pass.found |= kind
    last = end
    i = end - 1
  }
  if (pass.found === 0) return undefined
  copy(b, source, last, source.length)
  return layerOf(b, layer)
}

/**
 * The layer with every escape decoded, and, where that pass mixed kinds or
 * went deeper than one level, each kind alone and each kind one level.
 */
const unescapedLayers = (layer: Layer): Array<Layer> => {
  const all: Pass = { kinds: everyKind, oneLevel: false, found: 0, deep: false }
  const decoded = unescapeLayer(layer, all)
  if (decoded === undefined) return []
  const layers = [decoded]
  const mixed = all.found !== percent && all.found !== htmlEntity && all.found !== stringEscape
  if (!mixed && !all.deep) return layers
  for (const kind of [percent, htmlEntity, stringEscape]) {
    if ((all.found & kind) === 0) continue
    if (mixed) {
      const alone = unescapeLayer(layer, { kinds: kind, oneLevel: false, found: 0, deep: false })
      if (alone !== undefined) layers.push(alone)
    }
    if (all.deep && kind !== stringEscape) {
      const once = unescapeLayer(layer, { kinds: kind, oneLevel: true, found: 0, deep: false })
      if (once !== undefined) layers.push(once)
    }
  }
  return layers
}

// ---------------------------------------------------------------------------
// base64
// ---------------------------------------------------------------------------

const base64Run = /[A-Za-z0-9+/_-]{11,}(={1,2})?/g
const sextets = new Int8Array(128).fill(-1)
for (let i = 0; i < 64; i++) {
  sextets["ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".charCodeAt(i)] = i
}
sextets["-".charCodeAt(0)] = 62
sextets["_".charCodeAt(0)] = 63

/** The shortest stretch of text a decoded run must hold to be read as text. */
const shortestText = 8

/** The base64 of `source`'s characters `start` to `end`, decoded. */
const base64Bytes = (source: string, start: number, end: number): Uint8Array => {
  const bytes = new Uint8Array(Math.floor(((end - start) * 6) / 8))
  let bits = 0
  let count = 0
  let n = 0
  for (let i = start; i < end; i++) {
    bits = ((bits << 6) | sextets[source.charCodeAt(i)]!) & 0xffffff
    count += 6
    if (count >= 8) {
      count -= 8
      bytes[n++] = (bits >> count) & 0xff
    }
  }
  return bytes
}

/**
 * The stretches of text the base64 run `start`..`end` holds, read from each
 * of the four characters it may start at, each mapped to the characters that
 * encode it (and the padding after the run, up to `padded`, when it ends it).
 */
const base64Texts = (
  source: string,
  start: number,
  end: number,
  padded: number
): Array<readonly [string, number, number]> => {
  const found: Array<readonly [string, number, number]> = []
  for (let offset = 0; offset < 4 && end - start - offset >= 11; offset++) {
    const from = start + offset
    const bytes = base64Bytes(source, from, end)
    let stretch = 0
    for (let i = 0; i <= bytes.length; i++) {
      const length = i < bytes.length ? characterAt(bytes, i, bytes.length) : 0
      if (length > 0) {
        i += length - 1
        continue
      }
      if (i - stretch >= shortestText) {
        found.push([
          utf8.decode(bytes.subarray(stretch, i)),
          from + Math.floor((stretch * 8) / 6),
          i === bytes.length ? padded : Math.min(end, from + Math.floor(((i - 1) * 8 + 7) / 6) + 1)
        ])
      }
      stretch = i + 1
    }
    // the whole run is text from its first character: it starts nowhere else
    if (offset === 0 && found.length === 1 && found[0]![1] === start && bytes.length - found[0]![0].length < 3) break
  }
  return found
}

/**
 * The text with its base64 runs read as the text they hold, or `undefined`
 * when none holds any. `read` keeps what each run (with its padding) held,
 * from its start, for the other layers of the same text (most runs are the
 * same in all of them).
 */
const base64Layer = (
  layer: Layer,
  read: Map<string, Array<readonly [string, number, number]>>
): Layer | undefined => {
  const source = layer.text
  const b = builder()
  let last = 0
  base64Run.lastIndex = 0
  for (let match = base64Run.exec(source); match !== null; match = base64Run.exec(source)) {
    const start = match.index
    const padded = start + match[0].length
    const end = padded - (match[1]?.length ?? 0)
    let texts = read.get(match[0])
    if (texts === undefined) {
      texts = base64Texts(source, start, end, padded).map(([text, from, to]) => [text, from - start, to - start])
      read.set(match[0], texts)
    }
    if (texts.length === 0) continue
    copy(b, source, last, start)
    for (const [text, from, to] of texts) {
      piece(b, text, start + from, start + to, false)
      // apart, so that no two stretches read as one
      piece(b, "\n", start, padded, false)
    }
    last = padded
  }
  if (last === 0) return undefined
  copy(b, source, last, source.length)
  return layerOf(b, layer)
}

// ---------------------------------------------------------------------------
// layers
// ---------------------------------------------------------------------------

/** Every text decoded from `text` (not `text` itself), each once, within the depth and the budget. */
const layersOf = (text: string): Array<Layer> => {
  const root: Layer = { text, source: undefined, at: [0], from: [0], to: [text.length], copied: [true] }
  const seen = new Set([text])
  const layers: Array<Layer> = []
  let left = budget(text.length)
  const read = new Map<string, Array<readonly [string, number, number]>>()
  let current: Array<Layer> = [root]
  for (let level = 0; level < depth && current.length > 0; level++) {
    const next: Array<Layer> = []
    for (const layer of current) {
      if (left <= 0) return layers
      const base64 = base64Layer(layer, read)
      for (const decoded of base64 === undefined ? unescapedLayers(layer) : [...unescapedLayers(layer), base64]) {
        left -= layer.text.length
        if (seen.has(decoded.text)) continue
        left -= decoded.text.length
        seen.add(decoded.text)
        layers.push(decoded)
        next.push(decoded)
      }
    }
    current = next
  }
  return layers
}

/**
 * The texts `text` decodes to (see the module's comment), not `text` itself.
 *
 * @internal
 */
export const decodedTexts = (text: string): Array<string> => layersOf(text).map((layer) => layer.text)

/**
 * Texts to find (known credentials in all their forms): one pattern of them,
 * or, for many, a tree of them by pieces of 8 characters (a pattern of
 * thousands of alternatives takes seconds to compile, longer the more it
 * has).
 *
 * @internal
 */
export type Literals = RegExp | Tree

/**
 * The texts that share their first `depth` characters: a few, compared
 * whole, and, where they are many, the longer ones by their next piece.
 *
 * @internal
 */
export interface Tree {
  readonly depth: number
  readonly texts: Array<string>
  next?: Map<string, Tree>
  /** The root's: every text, and as patterns of {@link patternSize} each (made when a text first needs them). */
  readonly all?: ReadonlyArray<string>
  patterns?: ReadonlyArray<RegExp>
}

/** How many texts one pattern holds at most. */
const patternSize = 1024

/** How many characters a tree's level reads, and how many texts a node compares whole at most before it splits. */
const pieceLength = 8
const leafSize = 16

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** One pattern of the texts, its alternatives longest first. */
const patternOf = (texts: Array<string>): RegExp =>
  new RegExp(texts.sort((a, b) => b.length - a.length).map(escapeRegExp).join("|"), "g")

const insert = (root: Tree, text: string): void => {
  let node = root
  while (node.next !== undefined && text.length >= node.depth + pieceLength) {
    const piece = text.slice(node.depth, node.depth + pieceLength)
    let next = node.next.get(piece)
    if (next === undefined) node.next.set(piece, next = { depth: node.depth + pieceLength, texts: [] })
    node = next
  }
  node.texts.push(text)
  if (node.texts.length > leafSize && node.next === undefined) {
    // too many to compare whole: the longer ones go a level down
    const texts = node.texts.splice(0)
    node.next = new Map()
    for (const each of texts) insert(node, each)
  }
}

/**
 * The texts to find, or `undefined` when there are none.
 *
 * @internal
 */
export const literalsOf = (texts: Iterable<string>): Literals | undefined => {
  const all = [...new Set(texts)].filter((text) => text.length > 0)
  if (all.length === 0) return undefined
  if (all.length <= patternSize) return patternOf(all)
  const root: Tree = { depth: 0, texts: [], next: new Map(), all }
  for (const text of all) insert(root, text)
  return root
}

/**
 * The length of the longest text of `root` that starts at `start` in `text`,
 * or 0; `work` loses the characters compared.
 */
const longestAt = (text: string, start: number, root: Tree, work: { left: number }): number => {
  let longest = 0
  for (let node: Tree | undefined = root; node !== undefined;) {
    for (const candidate of node.texts) {
      work.left -= candidate.length - node.depth
      if (candidate.length > longest && text.startsWith(candidate, start)) longest = candidate.length
    }
    const at: number = start + node.depth
    work.left -= pieceLength
    node = node.next !== undefined && at + pieceLength <= text.length
      ? node.next.get(text.slice(at, at + pieceLength))
      : undefined
  }
  return longest
}

/**
 * Calls `found` with the range of the longest of the texts that starts at
 * each position of `text` where one does: two texts that overlap
 * (`…5678` and `5678…`) are both found where `text` holds them joined: a
 * pattern (its alternatives longest first) looks again from the character
 * after each match's first; a tree looks each position up a level at a time,
 * as far as the text follows one of its texts.
 */
const matchesIn = (text: string, literals: Literals, found: (start: number, end: number) => void): void => {
  if (literals instanceof RegExp) return patternMatches(text, 0, literals, found)
  // a text that follows long texts of the tree at many places (`aaaa…` and a known `aaaa…b`) costs more than
  // reading it with the tree's patterns
  const work = { left: 8 * text.length + 65_536 }
  for (let i = 0; i < text.length; i++) {
    if (work.left < 0) {
      const texts = literals.all ?? []
      literals.patterns ??= Array.from(
        { length: Math.ceil(texts.length / patternSize) },
        (_, k) => patternOf(texts.slice(k * patternSize, (k + 1) * patternSize))
      )
      for (const pattern of literals.patterns) patternMatches(text, i, pattern, found)
      return
    }
    const length = longestAt(text, i, literals, work)
    if (length > 0) found(i, i + length)
  }
}

/**
 * The matches of `pattern` in `text` from `start`, looking again from the
 * character after each match's first (from its end once the matches read
 * many times the text's length: a text that repeats a known `abab…`).
 */
const patternMatches = (
  text: string,
  start: number,
  pattern: RegExp,
  found: (start: number, end: number) => void
): void => {
  let left = 8 * text.length + 65_536
  pattern.lastIndex = start
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    const end = match.index + match[0].length
    if (end > match.index) found(match.index, end)
    left -= match[0].length
    pattern.lastIndex = left > 0 ? match.index + 1 : Math.max(end, match.index + 1)
  }
}

/**
 * The ranges of `text` (start, end) that hold one of the texts to find, as
 * it stands or once decoded, those that overlap included, merged, in order.
 *
 * @internal
 */
export const encodedMatches = (
  text: string,
  literals: ReadonlyArray<Literals>
): Array<readonly [number, number]> => {
  const ranges: Array<readonly [number, number]> = []
  for (const each of literals) matchesIn(text, each, (start, end) => ranges.push([start, end]))
  for (const layer of layersOf(text)) {
    for (const each of literals) {
      matchesIn(layer.text, each, (start, end) => ranges.push(originalRange(layer, start, end)))
    }
  }
  ranges.sort((a, b) => a[0] - b[0])
  const merged: Array<readonly [number, number]> = []
  for (const range of ranges) {
    const last = merged[merged.length - 1]
    if (last !== undefined && range[0] <= last[1]) merged[merged.length - 1] = [last[0], Math.max(last[1], range[1])]
    else merged.push(range)
  }
  return merged
}
