// The only module that touches the generated N-API binding. Everything else imports from here,
// so the binding stays private and every native error becomes a KvEngineError in one place.
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

import { KvEngineError, type KvEngineErrorCode } from './KvEngineError.js'
import type * as Binding from '../native.cjs'
import { packageRoot } from './packageRoot.js'
import { addonLoadError, cpuTooOldError } from './addonLoadError.js'
import { missingCpuFeatures } from './cpuProbe.js'
import { glibcVersion } from './glibcVersion.js'
import { CUDA_ADDON, CUDA_PACKAGE, pickBinding } from './pickBinding.js'

export type { NativeModel, NativeKvCache, NativeModelInfo, NativeCancelToken, NativeConstraint, NativeChatTemplate } from '../native.cjs'

const require = createRequire(import.meta.url)

function installedCudaAddons(root: string): string[] {
  const found = [join(root, CUDA_ADDON), join(root, 'npm', 'linux-x64-gnu-cuda', CUDA_ADDON)].filter((p) => existsSync(p))
  try {
    found.push(require.resolve(CUDA_PACKAGE))
  } catch {
    // not installed
  }
  return found
}

function loadBinding(): typeof Binding {
  const root = packageRoot()
  const missing = missingCpuFeatures(root)
  if (missing?.length) throw new KvEngineError('UNSUPPORTED', cpuTooOldError(missing))
  const choice = pickBinding({
    requested: process.env.KVENGINE_DEVICE,
    platform: process.platform,
    arch: process.arch,
    cudaAddons: installedCudaAddons(root),
    driver: existsSync('/proc/driver/nvidia/version'),
  })
  if (choice.kind === 'error') throw new KvEngineError('UNSUPPORTED', `kvengine: ${choice.message}`)
  if (choice.kind === 'cuda') {
    try {
      return require(choice.path) as typeof Binding
    } catch (cause) {
      // The CUDA build links the driver's libcuda; where that fails to load, the CPU build still
      // works unless CUDA was demanded.
      if (process.env.KVENGINE_DEVICE?.trim().toLowerCase() === 'cuda') {
        throw new KvEngineError('UNSUPPORTED', `kvengine: the CUDA build could not be loaded (${(cause as Error).message})`, { cause })
      }
    }
  }
  try {
    return require(join(root, 'native.cjs')) as typeof Binding
  } catch (cause) {
    const facts = { platform: process.platform, arch: process.arch, glibc: glibcVersion(), checkout: existsSync(join(root, 'Cargo.toml')), cause: (cause as Error).message }
    throw new KvEngineError('UNSUPPORTED', addonLoadError(facts), { cause })
  }
}

export const native = loadBinding()

const CODES = new Set<string>(['INVALID_ARGUMENT', 'NOT_FOUND', 'CORRUPT_FILE', 'UNSUPPORTED', 'CONTEXT_OVERFLOW', 'DISPOSED', 'ABORTED', 'INTERNAL'] satisfies KvEngineErrorCode[])

/** napi-rs's codes for an argument it could not convert (`InvalidArg`, `NumberExpected`, ...):
 * the caller passed a wrong type. */
const NAPI_ARGUMENT_CODE = /^(InvalidArg|[A-Za-z]+Expected)$/

/** Maps an error thrown by the binding to a KvEngineError. The binding's errors carry their
 * kind in `code` (crate/src/node/mod.rs, `to_napi`); napi-rs's own carry its status there. */
export function toKvEngineError(err: unknown): unknown {
  if (err instanceof KvEngineError || !(err instanceof Error)) return err
  const code = (err as { code?: unknown }).code
  if (typeof code === 'string' && CODES.has(code)) return new KvEngineError(code as KvEngineErrorCode, err.message, { cause: err })
  if (typeof code === 'string' && NAPI_ARGUMENT_CODE.test(code)) return new KvEngineError('INVALID_ARGUMENT', err.message, { cause: err })
  return new KvEngineError('INTERNAL', err.message, { cause: err })
}

export function callNative<T>(fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    throw toKvEngineError(err)
  }
}

export async function awaitNative<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    throw toKvEngineError(err)
  }
}
