// The API reference (npm run docs, typedoc into docs/api/) builds with every warning an error: each
// type the public API names is exported and documented where it is declared, and links resolve.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import test from 'ava'

import { root } from './models.js'

test('typedoc builds the API reference with no warning', (t) => {
  const typedoc = join(root, 'node_modules', 'typedoc', 'bin', 'typedoc')
  const r = spawnSync(process.execPath, [typedoc, '--emit', 'none'], { cwd: root, encoding: 'utf8' })
  t.is(r.status, 0, r.stdout + r.stderr)
  t.notRegex(r.stdout + r.stderr, /warning/i)
})
