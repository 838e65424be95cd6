import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import { createHash } from "node:crypto"
import * as Sha256 from "../src/internal/sha256.js"

const node = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex")

describe("sha256", () => {
  it("matches the standard test vectors", () => {
    assert.strictEqual(Sha256.sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    assert.strictEqual(Sha256.sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    // the 448-bit message: its padding takes a second block
    assert.strictEqual(
      Sha256.sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    )
    // the 896-bit message: two blocks of data
    assert.strictEqual(
      Sha256.sha256(
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"
      ),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
    )
    assert.strictEqual(
      Sha256.sha256("a".repeat(1_000_000)),
      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
    )
  })

  it("hashes the UTF-8 bytes of non-ASCII text", () => {
    assert.strictEqual(Sha256.sha256("héllo wörld"), "a1003f7d04a4115711d0b48a2eaf1359ce565d2d2a6fd65098dfcffadeeef59f")
    assert.strictEqual(
      Sha256.sha256("联系alice@example.com"),
      "ec4cf5e51569df245cd5f08d0376e914afaca53c67a268f82108d611b3380e3a"
    )
    assert.strictEqual(Sha256.sha256("😀"), "f0443a342c5ef54783a111b51ba56c938e474c32324d90c3a60c9c8e3a37e2d9")
  })

  it("pads every length around a block boundary", () => {
    for (const length of [55, 56, 57, 63, 64, 65, 119, 120, 127, 128]) {
      assert.strictEqual(Sha256.sha256("x".repeat(length)), node("x".repeat(length)), `length ${length}`)
    }
  })

  it.prop("agrees with node:crypto", [FastCheck.string({ unit: "grapheme", maxLength: 300 })], ([value]) => {
    assert.strictEqual(Sha256.sha256(value), node(value))
  })

  it.prop("agrees with node:crypto on any code points", [FastCheck.string({ unit: "binary", maxLength: 200 })], ([
    value
  ]) => {
    assert.strictEqual(Sha256.sha256(value), node(value))
  })
})
