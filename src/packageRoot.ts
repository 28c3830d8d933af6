import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The installed package's folder (it holds native.cjs), whether running from src/ or dist/. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'native.cjs'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error('kvengine: cannot find its package folder (native.cjs); reinstall the package')
    dir = parent
  }
  return dir
}
