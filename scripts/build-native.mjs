#!/usr/bin/env node
// npm run build:native [-- --target <triple>]: the engine's addon (napi build, with native.cjs and
// native.d.cts) and, for x64, the CPU probe (crate/cpu_probe) beside it.
//
// Linux glibc addons link through cargo-zigbuild against glibc 2.17, the floor the platform
// package promises: Ubuntu 20.04, Debian 11, RHEL 8 and Amazon Linux 2 run Node 20 on a glibc
// older than this machine's, and a plain build takes its symbol versions from the build machine.
// zig comes from PyPI's ziglang wheel (fetched and unpacked by our own Node code: no Python) and
// cargo-zigbuild from crates.io, both pinned and cached in .cache/tools. Other hosts and targets
// build with plain cargo.
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// Run with tsx (npm run build:native): the package's own downloader and zip reader, before dist/ exists.
import { downloadFile } from '../src/downloadFile.js'
import { extractZip } from '../src/extractZip.js'
import { glibcVersion } from '../src/glibcVersion.js'
import { napiPlatform } from '../src/napiPlatform.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const tools = join(root, '.cache', 'tools')
const ZIG = {
  version: '0.17.1',
  wheels: {
    x64: {
      path: '59/e3/2a34676370a11c36b7cd04ffb2439c1089c0530cf4b01408c77cf7f8d9c3/ziglang-0.17.1-py3-none-manylinux_2_12_x86_64.manylinux2010_x86_64.musllinux_1_1_x86_64.whl',
      sha256: 'ea6cc5d87b033cf0aedfbc8f9549a908cae6c50ac31f1698188fa48a74524b54',
      megabytes: 101,
    },
    arm64: {
      path: '91/72/bb7c4f098ba3e535fa2ebefd9f26327ba63fb0672562959255cb5dd37aff/ziglang-0.17.1-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64.whl',
      sha256: 'b7c5f02fccd40f89b999ee16a1f5ddced56e6182370f8affe494bcf8a28cf07e',
      megabytes: 95,
    },
  },
}
const CARGO_ZIGBUILD = '0.24.1'
const GLIBC_FLOOR = '2.17'

const log = (msg) => console.error(`build-native: ${msg}`)
const run = (cmd, args, env = process.env) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit', env })

/** The Rust target to build: --target's value, else this host's (glibc Linux x64 at the floor). */
function requestedTarget() {
  const at = process.argv.indexOf('--target')
  if (at !== -1) return process.argv[at + 1]
  if (process.platform === 'linux' && process.arch === 'x64' && glibcVersion()) {
    return `x86_64-unknown-linux-gnu.${GLIBC_FLOOR}`
  }
  return undefined
}

/** zig's folder (the wheel's `ziglang/`), downloaded once from PyPI and checked against its hash. */
async function zigDir() {
  const dir = join(tools, `ziglang-${ZIG.version}`)
  if (existsSync(join(dir, 'ziglang', 'zig'))) return join(dir, 'ziglang')
  const wheel = ZIG.wheels[process.arch]
  if (!wheel) throw new Error(`build-native: no pinned ziglang wheel for a ${process.arch} host; add one to ZIG.wheels`)
  mkdirSync(tools, { recursive: true })
  const file = join(tools, `ziglang-${ZIG.version}-${process.arch}.whl`)
  log(`downloading ziglang ${ZIG.version} from PyPI (${wheel.megabytes} MB)`)
  await downloadFile(new URL(`https://files.pythonhosted.org/packages/${wheel.path}`), file, { sha256: wheel.sha256 })
  rmSync(dir, { recursive: true, force: true })
  await extractZip(file, dir)
  rmSync(file)
  return join(dir, 'ziglang')
}

function cargoZigbuildDir() {
  const bin = join(tools, 'bin')
  const installed = existsSync(join(bin, 'cargo-zigbuild')) && execFileSync(join(bin, 'cargo-zigbuild'), ['--version'], { encoding: 'utf8' }).includes(CARGO_ZIGBUILD)
  if (!installed) {
    log(`installing cargo-zigbuild ${CARGO_ZIGBUILD} from crates.io`)
    run('cargo', ['install', 'cargo-zigbuild', '--version', CARGO_ZIGBUILD, '--locked', '--root', tools])
  }
  return bin
}

/** The probe, for plain x86-64: the addon it guards is x86-64-v3, and faults on load below that. */
function buildCpuProbe(target, zigbuild, env) {
  // cargo-zigbuild's glibc suffix is not part of cargo's output folder.
  const triple = target?.split('.')[0]
  if (triple ? !triple.startsWith('x86_64-') : process.arch !== 'x64') return
  const platform = triple === undefined ? napiPlatform() : platformOf(triple)
  const targetDir = join(root, 'target', 'cpu-probe')
  // Its own target folder: other RUSTFLAGS in target/ would rebuild the engine's dependencies.
  const cargoArgs = [zigbuild ? 'zigbuild' : 'build', '--release', '-p', 'kvengine-cpu-probe', '--target-dir', targetDir, ...(target ? ['--target', target] : [])]
  // RUSTFLAGS overrides .cargo/config.toml's target-cpu=x86-64-v3. musl links its C library
  // statically by default, which leaves no cdylib to make (napi build unsets it for the addon).
  const crt = triple?.endsWith('-musl') ? ' -C target-feature=-crt-static' : ''
  run('cargo', cargoArgs, { ...env, RUSTFLAGS: `-C target-cpu=x86-64${crt}` })
  const library = { linux: 'libkvengine_cpu_probe.so', darwin: 'libkvengine_cpu_probe.dylib', win32: 'kvengine_cpu_probe.dll' }[platform.split('-')[0]]
  const out = join(root, `kvengine-cpu.${platform}.node`)
  copyFileSync(join(targetDir, triple ?? '', 'release', library), out)
  log(`wrote ${out}`)
}

function platformOf(triple) {
  const known = { 'x86_64-unknown-linux-gnu': 'linux-x64-gnu', 'x86_64-unknown-linux-musl': 'linux-x64-musl', 'x86_64-apple-darwin': 'darwin-x64', 'x86_64-pc-windows-msvc': 'win32-x64-msvc' }
  if (!known[triple]) throw new Error(`build-native: no platform package for ${triple}`)
  return known[triple]
}

const target = requestedTarget()
// glibc at a version floor, and musl, whose C library zig brings along.
const zigbuild = target !== undefined && /-linux-(gnu\.\d|musl)/.test(target)
const env = zigbuild ? { ...process.env, PATH: [await zigDir(), cargoZigbuildDir(), process.env.PATH].join(delimiter) } : process.env
const napi = join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
const targetArgs = target ? ['--target', target, ...(zigbuild ? ['--cross-compile'] : [])] : []
run(process.execPath, [napi, 'build', '--platform', '--release', '--manifest-path', 'crate/Cargo.toml', '-o', '.', '--js', 'native.cjs', '--dts', 'native.d.cts', ...targetArgs], env)
buildCpuProbe(target, zigbuild, env)
