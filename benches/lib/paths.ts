import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const OUT_DIR = join(ROOT, 'benches', 'out')
export const MODELS_DIR = process.env.KVENGINE_MODELS_DIR ?? join(ROOT, 'models')
