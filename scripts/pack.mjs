// npm run pack: the tarballs a release would publish, for the addons this machine has built, in
// pack/. What `npm install kvengine` gets from the registry, installable offline from files:
//   pack/kvengine-<version>.tgz                    the TypeScript package (dist/, native.cjs)
//   pack/kvengine-<platform>-<version>.tgz         each platform package whose .node is built here
//                                                  (napi build --platform writes it to the root)
//   pack/kvengine-linux-x64-gnu-cuda-<version>.tgz only when npm run build:cuda has run
// It builds dist/ afresh (never the addon: that is npm run build:native) and contacts no registry.
import { execFileSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { readNapiConfig } from '@napi-rs/cli'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const out = join(root, 'pack')
const CUDA_DIR = 'linux-x64-gnu-cuda'

const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'))
const npm = (args, cwd) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })

/** Packs `dir` into pack/ and returns the tarball's path. */
function pack(dir) {
  const [{ filename }] = JSON.parse(npm(['pack', '--json', '--pack-destination', out], dir))
  return join(out, filename)
}

const { packageJson, packageName, binaryName, targets } = await readNapiConfig(join(root, 'package.json'))
const { version } = packageJson

// The root's optional dependencies name each platform package at exactly the root's version, so
// a platform package at any other version would leave the addon uninstalled.
const platformDirs = [...targets.map((t) => t.platformArchABI), CUDA_DIR]
for (const dir of platformDirs) {
  const manifest = readJson(join(root, 'npm', dir, 'package.json'))
  if (manifest.version !== version) {
    throw new Error(`npm/${dir} is at version ${manifest.version}, the root at ${version}: bump versions with npm version, which runs napi version`)
  }
}

// A fresh dist/: a tarball holds what the sources compile to now, not files of deleted sources.
rmSync(join(root, 'dist'), { recursive: true, force: true })
npm(['run', 'build:ts'], root)
rmSync(out, { recursive: true, force: true })
mkdirSync(out)

// The root package as `napi prepublish` leaves it before `npm publish`: the same files, plus
// optionalDependencies on every target's package. They are written only at publish time because
// in the repository they would name versions not yet published, and npm ci refuses a lock file
// without them.
const stage = join(out, 'stage', packageName)
const [{ files }] = JSON.parse(npm(['pack', '--dry-run', '--json'], root))
for (const { path } of files) {
  mkdirSync(dirname(join(stage, path)), { recursive: true })
  cpSync(join(root, path), join(stage, path))
}
const optionalDependencies = Object.fromEntries(targets.map((t) => [`${packageName}-${t.platformArchABI}`, version]))
writeFileSync(join(stage, 'package.json'), `${JSON.stringify({ ...packageJson, optionalDependencies }, null, 2)}\n`)
const tarballs = [pack(stage)]
rmSync(join(out, 'stage'), { recursive: true })

// Each platform package gets its addon copied in, as `napi artifacts` does from CI's artifacts
// (which refuses to run unless every target's addon is present, so it cannot serve one machine).
// Their files are the addon and, for x64, the CPU probe (scripts/build-native.mjs).
for (const dir of platformDirs) {
  const pkgDir = join(root, 'npm', dir)
  const { main: addon, files } = readJson(join(pkgDir, 'package.json'))
  if (!existsSync(join(root, addon)) && !existsSync(join(pkgDir, addon))) continue
  for (const file of files) {
    if (existsSync(join(root, file))) copyFileSync(join(root, file), join(pkgDir, file))
    if (!existsSync(join(pkgDir, file))) throw new Error(`npm/${dir} lists ${file}, which is not built: run npm run build:native`)
  }
  tarballs.push(pack(pkgDir))
}
if (tarballs.length === 1) {
  throw new Error(`no ${binaryName}.<platform>.node is built here for ${platformDirs.join(', ')}: run npm run build:native first`)
}
for (const tarball of tarballs) console.log(tarball)
