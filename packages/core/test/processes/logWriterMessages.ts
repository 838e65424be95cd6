/** The messages `logWriter.ts` appends: batch `index` is `batchSize` messages of ~4 KiB, the same in every process. */
export const batchSize = 64

export const batch = (index: number): ReadonlyArray<unknown> =>
  Array.from({ length: batchSize }, (_, i) => ({
    role: "user",
    content: [{ type: "text", text: `${index}/${i} ${"x".repeat(4096)}` }]
  }))

/** The thread after `batches` batches. */
export const thread = (batches: number): ReadonlyArray<unknown> =>
  Array.from({ length: batches }, (_, index) => batch(index)).flat()
