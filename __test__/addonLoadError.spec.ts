// The message a user gets when the native addon does not load: the platform and what the
// prebuilt addon needs, and build advice only in a repository checkout.
import test from 'ava'

import { addonLoadError, cpuTooOldError, type AddonFacts } from '../src/addonLoadError.js'

const user: AddonFacts = { platform: 'linux', arch: 'x64', glibc: '2.36', checkout: false, cause: 'Cannot find module' }

test('an npm user is told what the prebuilt addon needs, never to build it', (t) => {
  for (const f of [user, { ...user, platform: 'darwin', arch: 'arm64' }, { ...user, glibc: '2.12' }, { ...user, glibc: undefined }]) {
    const message = addonLoadError(f)
    t.notRegex(message, /npm run build|cargo/)
    t.regex(message, /linux-x64 with glibc 2\.17 or newer on an x86-64-v3 CPU/)
    t.true(message.includes(f.cause))
  }
})

test('the reason is named: platform, glibc version, musl, or a missing optional package', (t) => {
  t.regex(addonLoadError({ ...user, platform: 'darwin', arch: 'arm64' }), /darwin-arm64 is not published yet/)
  t.regex(addonLoadError({ ...user, glibc: '2.12' }), /this system has glibc 2\.12/)
  t.regex(addonLoadError({ ...user, glibc: '2.9' }), /this system has glibc 2\.9/)
  t.notRegex(addonLoadError({ ...user, glibc: '2.31' }), /this system has glibc/, 'Debian 11 is above the floor')
  t.regex(addonLoadError({ ...user, glibc: undefined }), /no glibc \(musl/)
  t.regex(addonLoadError(user), /--include=optional/)
})

test('a CPU below x86-64-v3 is told what it lacks and what the addon needs, with no build advice', (t) => {
  const message = cpuTooOldError(['avx2', 'fma'])
  t.regex(message, /lacks avx2, fma; .*x86-64-v3 CPU \(AVX2, FMA, F16C/)
  t.notRegex(message, /npm run build|cargo/)
})

test('a checkout is told to build', (t) => {
  t.regex(addonLoadError({ ...user, checkout: true }), /npm run build/)
})
