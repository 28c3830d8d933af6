import { KvEngineError } from './KvEngineError.js'

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i

/**
 * Refuses URLs a model may not be fetched from: anything but https, except plain http to this
 * machine (a local mirror or test server). Checked on every redirect too, so an https source
 * cannot hand the download over to an unencrypted host.
 */
export function checkDownloadUrl(url: URL, what = 'model URL'): void {
  if (url.protocol === 'https:') return
  if (url.protocol === 'http:' && LOOPBACK.test(url.hostname)) return
  throw new KvEngineError('INVALID_ARGUMENT', `${what} ${url.href} must use https:// (plain http:// only to localhost or 127.x.x.x)`)
}
