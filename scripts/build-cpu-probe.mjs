#!/usr/bin/env node
// Builds crate/cpu_probe for plain x86-64 (not the engine's x86-64-v3) and writes it beside the
// engine's addon as kvengine-cpu.<platform>.node, which src/cpuProbe.ts loads first. Only x64
// addons have a CPU floor above their architecture's baseline, so elsewhere this does nothing.
// Part of npm run build:native.
import { execFileSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')

if (process.arch !== 'x64') process.exit(0)
const abi = { linux: process.report.getReport().header.glibcVersionRuntime ? '-gnu' : '-musl', win32: '-msvc' }[process.platform] ?? ''
const out = join(root, `kvengine-cpu.${process.platform}-x64${abi}.node`)
// Its own target folder: other RUSTFLAGS in target/ would rebuild the engine's dependencies.
const targetDir = join(root, 'target', 'cpu-probe')
execFileSync('cargo', ['build', '--release', '-p', 'kvengine-cpu-probe', '--target-dir', targetDir], {
  cwd: root,
  stdio: 'inherit',
  // RUSTFLAGS overrides .cargo/config.toml's target-cpu=x86-64-v3.
  env: { ...process.env, RUSTFLAGS: '-C target-cpu=x86-64' },
})
const library = { linux: 'libkvengine_cpu_probe.so', darwin: 'libkvengine_cpu_probe.dylib', win32: 'kvengine_cpu_probe.dll' }[process.platform]
copyFileSync(join(targetDir, 'release', library), out)
console.error(`build-cpu-probe: wrote ${out}`)
