/**
 * The `next` one layer of a wrap chain (`wrapModelCall`, `wrapToolCall`)
 * gives its hook, remembering the request it was last called with and the
 * effect it gave. A hook that returns that very effect (a pass-through,
 * `(request, next) => next(request)`, also after changing the request)
 * passes on what the layers inside give: they, or the call at the end of
 * the chain, already checked it, so this layer need not check it again (a
 * check is a continuation and a succeed: two fiber operations per layer per
 * call).
 *
 * Whatever the hook does (calls `next` twice, later, for another request),
 * what is remembered is always a request and the effect `next` gave for it:
 * an effect the hook returns is only ever taken for passed on when it is one
 * of those.
 */
export class PassedOn<Request, Out> {
  private request: Request | undefined = undefined
  private given: Out | undefined = undefined

  constructor(private readonly inner: (request: Request) => Out) {}

  /** The `next` the hook gets: the inner layer, remembered. */
  readonly next = (request: Request): Out => {
    const given = this.inner(request)
    this.request = request
    this.given = given
    return given
  }

  /** Calls `hook` with `request` and this layer's `next`, forgetting what an earlier call of it was given. */
  call<R>(hook: (request: Request, next: (request: Request) => Out) => R, request: Request): R {
    this.request = undefined
    this.given = undefined
    return hook(request, this.next)
  }

  /**
   * The request `next` was given when `returned` is the effect it gave for
   * it during the last {@link call} (`undefined` when the hook returned
   * anything else); forgets both, so the layer keeps nothing alive.
   */
  passedOn(returned: unknown): Request | undefined {
    const request = returned !== undefined && returned === this.given ? this.request : undefined
    this.request = undefined
    this.given = undefined
    return request
  }
}
