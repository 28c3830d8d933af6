import { glibcVersion } from './glibcVersion.js'

/** napi-rs's name for this system's addon platform, as in `kvengine.<platform>.node` and the
 * `kvengine-<platform>` packages: linux-x64-gnu, linux-x64-musl, darwin-arm64, win32-x64-msvc. */
export function napiPlatform(): string {
  const abi = process.platform === 'linux' ? (glibcVersion() ? '-gnu' : '-musl') : process.platform === 'win32' ? '-msvc' : ''
  return `${process.platform}-${process.arch}${abi}`
}
