// What to tell a user whose native addon would not load. Pure, so every case is testable.

export interface AddonFacts {
  platform: string
  arch: string
  /** glibc's version on Linux (process.report), undefined elsewhere or on musl. */
  glibc: string | undefined
  /** A repository checkout (it has Cargo.toml), where building the addon is the remedy. */
  checkout: boolean
  /** Why require() failed. */
  cause: string
}

/** The one prebuilt addon today, and what it needs (linked against glibc 2.17 by scripts/build-native.mjs). */
export const PREBUILT = { platform: 'linux', arch: 'x64', glibc: '2.17', cpu: 'an x86-64-v3 CPU (AVX2, FMA, F16C; Intel Haswell, AMD Excavator or newer)' }

const older = (a: string, b: string) => {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number))
  return x[0] !== y[0] ? x[0] < y[0] : (x[1] ?? 0) < (y[1] ?? 0)
}

export function addonLoadError(f: AddonFacts): string {
  const where = `${f.platform}-${f.arch}`
  const head = `kvengine: the native addon for ${where} could not be loaded (${f.cause}).`
  if (f.checkout) return `${head} Build it with "npm run build".`
  const needs = `kvengine publishes a prebuilt addon for ${PREBUILT.platform}-${PREBUILT.arch} with glibc ${PREBUILT.glibc} or newer on ${PREBUILT.cpu}`
  if (where !== `${PREBUILT.platform}-${PREBUILT.arch}`) return `${head} ${needs}; ${where} is not published yet.`
  if (f.glibc === undefined) return `${head} ${needs}; this system has no glibc (musl builds are not published yet).`
  if (older(f.glibc, PREBUILT.glibc)) return `${head} ${needs}; this system has glibc ${f.glibc}.`
  return `${head} ${needs}. If the platform package kvengine-linux-x64-gnu is missing, reinstall kvengine with optional dependencies included (npm install --include=optional).`
}

/** For a CPU below the addon's floor, found by src/cpuProbe.ts before the addon is loaded. */
export function cpuTooOldError(missing: string[]): string {
  return `kvengine: this CPU lacks ${missing.join(', ')}; kvengine's native addon is built for ${PREBUILT.cpu} and would crash the process here, so it was not loaded.`
}
