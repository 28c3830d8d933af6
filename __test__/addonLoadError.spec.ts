// The message a user gets when the native addon does not load: the platform and what the
// prebuilt addon needs, and build advice only in a repository checkout.
import test from 'ava'

import { addonLoadError, type AddonFacts } from '../src/addonLoadError.js'

const user: AddonFacts = { platform: 'linux', arch: 'x64', glibc: '2.36', checkout: false, cause: 'Cannot find module' }

test('an npm user is told what the prebuilt addon needs, never to build it', (t) => {
  for (const f of [user, { ...user, platform: 'darwin', arch: 'arm64' }, { ...user, glibc: '2.31' }, { ...user, glibc: undefined }]) {
    const message = addonLoadError(f)
    t.notRegex(message, /npm run build|cargo/)
    t.regex(message, /linux-x64 with glibc 2\.34 or newer on an x86-64-v3 CPU/)
    t.true(message.includes(f.cause))
  }
})

test('the reason is named: platform, glibc version, musl, or a missing optional package', (t) => {
  t.regex(addonLoadError({ ...user, platform: 'darwin', arch: 'arm64' }), /darwin-arm64 is not published yet/)
  t.regex(addonLoadError({ ...user, glibc: '2.31' }), /this system has glibc 2\.31/)
  t.regex(addonLoadError({ ...user, glibc: '2.9' }), /this system has glibc 2\.9/)
  t.regex(addonLoadError({ ...user, glibc: undefined }), /no glibc \(musl/)
  t.regex(addonLoadError(user), /--include=optional/)
})

test('a checkout is told to build', (t) => {
  t.regex(addonLoadError({ ...user, checkout: true }), /npm run build/)
})
