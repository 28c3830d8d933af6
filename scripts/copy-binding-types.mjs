// Runs after tsc (npm run build:ts). dist/src/native.d.ts keeps src/native.ts's `import type ...
// from '../native.cjs'`, which from dist/src/ means dist/native.cjs, whose types TypeScript looks
// for in dist/native.d.cts. tsc never copies a .d.cts, so without this the published types name a
// file that is not there: consumers get TS2307 and every binding type (ModelInfo among them)
// silently becomes `any`.
import { copyFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
copyFileSync(join(root, 'native.d.cts'), join(root, 'dist', 'native.d.cts'))
