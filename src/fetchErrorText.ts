/**
 * What went wrong in a failed fetch(), for a message. fetch throws a bare "fetch failed" (or
 * "terminated" mid-body) and keeps the socket's error in `cause`: that one says what happened
 * (ENOTFOUND, ECONNREFUSED, "other side closed").
 */
export function fetchErrorText(err: unknown): string {
  const inner = (err as { cause?: { code?: string; message?: string } })?.cause
  if (inner?.message && inner.code) return `${inner.message}, ${inner.code}`
  return inner?.code ?? inner?.message ?? (err as Error)?.message ?? String(err)
}
