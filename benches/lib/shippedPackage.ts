// The package as it ships: tsc's output in dist/, which `npm run bench` builds first. The
// benchmarks time it rather than the sources run through tsx, whose transform (esbuild's
// keepNames) adds a helper call for every closure a function makes: on a decode step that was
// ~14 µs of work users of the package never do.
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

import { ROOT } from './paths.js'

function newestSource(dir: string): number {
  return readdirSync(dir, { withFileTypes: true }).reduce((newest, entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return Math.max(newest, newestSource(path))
    return entry.name.endsWith('.ts') ? Math.max(newest, statSync(path).mtimeMs) : newest
  }, statSync(join(ROOT, 'index.ts')).mtimeMs)
}

/** kvengine from dist/, refusing a build older than the sources, which would time old code. */
export async function importShippedPackage(): Promise<typeof import('../../dist/index.js')> {
  const built = join(ROOT, 'dist', 'index.js')
  let builtAt: number
  try {
    builtAt = statSync(built).mtimeMs
  } catch {
    throw new Error(`${built} is missing: build the package first (npm run build:ts)`)
  }
  if (builtAt < newestSource(join(ROOT, 'src'))) throw new Error(`${built} is older than src/: rebuild it (npm run build:ts)`)
  return import('../../dist/index.js')
}
