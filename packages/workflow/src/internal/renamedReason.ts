import * as Schema from "effect/Schema"

/**
 * An error class as journals of an earlier version stored it: with its free
 * text under `previous` (`description`, `problem`) where the class now has
 * `reason`. It decodes into the class as it is now, and encodes back to the
 * old shape; put it after the class in a union, so the class encodes first.
 */
export const renamedReason = <
  Self extends { readonly _tag: string; readonly reason: string },
  I extends { readonly reason: string },
  R
>(
  schema: Schema.Schema<Self, I, R> & { readonly _tag: Self["_tag"] },
  previous: string
): Schema.Schema<Self, unknown, R> =>
  Schema.transform(
    Schema.Struct(
      { _tag: Schema.Literal(schema._tag), [previous]: Schema.String },
      Schema.Record({ key: Schema.String, value: Schema.Unknown })
    ),
    schema,
    {
      strict: false,
      decode: ({ [previous]: reason, ...rest }) => ({ ...rest, reason }),
      encode: ({ reason, ...rest }) => ({ ...rest, [previous]: reason })
    }
  ) as Schema.Schema<Self, unknown, R>

/**
 * An error class as journals of an earlier version stored it: with its
 * literal `reason` spelled as `previous` lists (`"not-a-stream"`), where the
 * class now has the kind it maps to (`"NotAStream"`). Decodes into the class
 * as it is now; put it after the class in a union, so the class encodes first.
 */
export const renamedKinds = <
  Self extends { readonly _tag: string; readonly reason: string },
  I extends { readonly reason: string },
  R
>(
  schema: Schema.Schema<Self, I, R> & { readonly _tag: Self["_tag"] },
  previous: { readonly [kind: string]: Self["reason"] }
): Schema.Schema<Self, unknown, R> => {
  const before = Object.fromEntries(Object.entries(previous).map(([old, now]) => [now, old]))
  return Schema.transform(
    Schema.Struct(
      {
        _tag: Schema.Literal(schema._tag),
        reason: Schema.Literal(...Object.keys(previous) as [string, ...Array<string>])
      },
      Schema.Record({ key: Schema.String, value: Schema.Unknown })
    ),
    schema,
    {
      strict: false,
      decode: ({ reason, ...rest }) => ({ ...rest, reason: previous[reason] }),
      encode: ({ reason, ...rest }) => ({ ...rest, reason: before[reason] })
    }
  ) as Schema.Schema<Self, unknown, R>
}
