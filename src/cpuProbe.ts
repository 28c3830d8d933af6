// Which x86-64-v3 features this CPU lacks, asked before the engine's addon is loaded: that addon is
// compiled for x86-64-v3, and on an older CPU it can fault with SIGILL while loading, which no
// try/catch survives. The probe (crate/cpu_probe) is a separate addon compiled for plain x86-64.
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

import { napiPlatform } from './napiPlatform.js'

const require = createRequire(import.meta.url)

/** Where the probe may be: beside native.cjs in a checkout, in the platform package when installed. */
function probePaths(root: string): string[] {
  const platform = napiPlatform()
  const file = `kvengine-cpu.${platform}.node`
  const paths = [join(root, file)]
  try {
    paths.push(require.resolve(`kvengine-${platform}/${file}`))
  } catch {
    // not installed (a checkout, or a platform package from before the probe)
  }
  return paths.filter((p) => existsSync(p))
}

/** The missing features' names, [] on a capable CPU, undefined where there is nothing to ask
 * (not x64, or no probe installed beside the addon). */
export function missingCpuFeatures(root: string): string[] | undefined {
  if (process.arch !== 'x64') return undefined
  const [path] = probePaths(root)
  if (path === undefined) return undefined
  return (require(path) as { missingCpuFeatures(): string[] }).missingCpuFeatures()
}
