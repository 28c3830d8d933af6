// `npm install kvengine` as a user gets it: the tarballs `npm run pack` writes, installed offline
// into an empty project by a user with a fresh HOME and no Rust toolchain on PATH, then run
// through its bin and compiled against by strict TypeScript projects, ESM and CommonJS.
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'

import test from 'ava'

import { modelPath, root } from './models.js'

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string; napi: { targets: string[] } }
const rootTarball = `kvengine-${pkg.version}.tgz`
const platformTarball = `kvengine-linux-x64-gnu-${pkg.version}.tgz`

const work = mkdtempSync(join(tmpdir(), 'kvengine-install-'))
const project = join(work, 'project')
const tsc = join(root, 'node_modules', '.bin', 'tsc')
const npmDir = dirname(execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim())
// A user's machine: node and npm, the system's tools, nothing of ours (~/.cargo/bin above all).
const userEnv = {
  PATH: [...new Set([dirname(process.execPath), npmDir])].join(':') + ':/usr/bin:/bin',
  HOME: join(work, 'home'),
  npm_config_update_notifier: 'false',
}

function sh(file: string, args: string[], cwd: string): string {
  const r = spawnSync(file, args, { cwd, env: userEnv, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`${file} ${args.join(' ')} exited ${r.status}:\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

let packed: string[] = []

test.before(() => {
  packed = execFileSync(process.execPath, [join(root, 'scripts', 'pack.mjs')], { cwd: root, encoding: 'utf8' }).trim().split('\n')
  mkdirSync(userEnv.HOME)
  mkdirSync(project)
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }))
  // --offline with an empty cache: any package not among these tarballs fails instead of coming
  // from the registry. The root's optional dependency on kvengine-linux-x64-gnu is met by the
  // tarball beside it, as by the registry's copy after publishing.
  sh('npm', ['install', '--offline', '--no-audit', '--no-fund', join(root, 'pack', rootTarball), join(root, 'pack', platformTarball)], project)
})

test.after.always(() => rmSync(work, { recursive: true, force: true }))

test.serial('npm run pack writes the root tarball and this machine’s platform tarball', (t) => {
  const names = packed.map((p) => basename(p))
  t.deepEqual(names.slice(0, 2), [rootTarball, platformTarball])
  t.true(names.slice(2).every((n) => n === `kvengine-linux-x64-gnu-cuda-${pkg.version}.tgz`), names.join(', '))
  const files = (tarball: string) => execFileSync('tar', ['tzf', join(root, 'pack', tarball)], { encoding: 'utf8' }).trim().split('\n')
  const rootFiles = files(rootTarball)
  t.true(rootFiles.includes('package/LICENSE') && rootFiles.includes('package/dist/native.d.cts'))
  t.false(rootFiles.some((f) => f.endsWith('.node')), 'the root package carries no addon')
  t.deepEqual(files(platformTarball).sort(), ['package/LICENSE', 'package/README.md', 'package/kvengine-cpu.linux-x64-gnu.node', 'package/kvengine.linux-x64-gnu.node', 'package/package.json'])
})

test.serial('the installed root names every target’s package at its own version, and npm meets this one from the tarball', (t) => {
  const installed = JSON.parse(readFileSync(join(project, 'node_modules', 'kvengine', 'package.json'), 'utf8')) as {
    optionalDependencies: Record<string, string>
  }
  t.is(Object.keys(installed.optionalDependencies).length, pkg.napi.targets.length)
  t.true(Object.values(installed.optionalDependencies).every((v) => v === pkg.version))
  const tree = JSON.parse(sh('npm', ['ls', '--offline', '--all', '--json'], project)) as {
    dependencies: { kvengine: { dependencies: Record<string, { version?: string }> } }
  }
  t.is(tree.dependencies.kvengine.dependencies['kvengine-linux-x64-gnu']?.version, pkg.version)
})

test.serial('npx kvengine generate streams from the installed package, with no Rust toolchain', async (t) => {
  t.not(spawnSync('sh', ['-c', 'command -v cargo'], { env: userEnv }).status, 0, 'cargo must not be on the user’s PATH')
  const prompt = 'The capital of France is'
  const args = ['--offline', 'kvengine', 'generate', '-m', modelPath('Q4_1'), '--raw', '-p', prompt, '--max-tokens', '8', '--temperature', '0']
  const child = spawn('npx', args, { cwd: project, env: userEnv, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  let chunks = 0
  child.stdout.on('data', (d: Buffer) => ((stdout += d.toString()), chunks++))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const code = await new Promise((resolve) => child.on('close', resolve))
  t.is(code, 0, stderr)
  t.true(stdout.startsWith(prompt) && stdout.trim().length > prompt.length, stdout)
  t.true(chunks > 1, `stdout arrived in ${chunks} writes`)
})

// A type that failed to resolve becomes `any` silently, so each consumer asserts that the types
// it touches are not `any`; skipLibCheck false makes tsc check kvengine's .d.ts files too.
const ESM_CONSUMER = `import { Engine, KvCache, Model, type ModelInfo } from 'kvengine'

type IsAny<T> = 0 extends 1 & T ? true : false
const infoIsTyped: IsAny<ModelInfo> = false
const handleIsTyped: IsAny<ConstructorParameters<typeof KvCache>[0]> = false

const model = await Model.load(process.argv[2]!)
const vocabSize: number = model.info.vocabSize
let text = ''
for await (const step of new Engine(model).generate(model.tokenizer.encode('The capital of France is'), { maxTokens: 4, temperature: 0 })) {
  text += step.text[0]
}
model.dispose()
console.log(JSON.stringify({ vocabSize, text, infoIsTyped, handleIsTyped }))
`
const CJS_CONSUMER = `// Compiles to require('kvengine'): Node >= 20.19 loads the ES module for it.
import { Model, type ModelInfo } from 'kvengine'

type IsAny<T> = 0 extends 1 & T ? true : false
const infoIsTyped: IsAny<ModelInfo> = false

async function main(): Promise<void> {
  const model = await Model.load(process.argv[2]!)
  const architecture: string = model.info.architecture
  model.dispose()
  console.log(JSON.stringify({ architecture, infoIsTyped }))
}
void main()
`

test.serial('strict TypeScript projects compile against the installed types and run, as ESM and as CommonJS', (t) => {
  const consumer = join(project, 'consumer')
  mkdirSync(consumer)
  writeFileSync(join(consumer, 'esm.ts'), ESM_CONSUMER)
  writeFileSync(join(consumer, 'cjs.cts'), CJS_CONSUMER)
  const compilerOptions = {
    strict: true,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2022',
    skipLibCheck: false,
    outDir: 'out',
    // A Node project has @types/node; this one borrows the repository's.
    typeRoots: [join(root, 'node_modules', '@types')],
    types: ['node'],
  }
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['consumer'] }))
  const compiled = spawnSync(process.execPath, [tsc, '-p', project], { cwd: project, env: userEnv, encoding: 'utf8' })
  t.is(compiled.status, 0, compiled.stdout + compiled.stderr)

  const esm = JSON.parse(sh(process.execPath, [join(project, 'out', 'esm.js'), modelPath('Q4_1')], project)) as { vocabSize: number; text: string }
  t.is(esm.vocabSize, 49152)
  t.true(esm.text.length > 0)
  const cjs = JSON.parse(sh(process.execPath, [join(project, 'out', 'cjs.cjs'), modelPath('Q4_1')], project)) as { architecture: string }
  t.is(cjs.architecture, 'llama')
})

test.serial('the installed Linux addon and CPU probe need no glibc newer than 2.17 (Debian 11, Ubuntu 20.04, RHEL 8, Amazon Linux 2)', (t) => {
  const installed = join(project, 'node_modules', 'kvengine-linux-x64-gnu')
  for (const file of ['kvengine.linux-x64-gnu.node', 'kvengine-cpu.linux-x64-gnu.node']) {
    // binutils: the linker Rust builds need, so present wherever this suite can build.
    const symbols = execFileSync('objdump', ['-T', join(installed, file)], { encoding: 'utf8' })
    const versions = [...symbols.matchAll(/\bGLIBC_(\d+)\.(\d+)(?:\.(\d+))?\b/g)].map((m) => ({ name: m[0], rank: Number(m[1]) * 1e6 + Number(m[2]) * 1e3 + Number(m[3] ?? 0) }))
    t.true(versions.length > 0, `${file} names no glibc symbol versions`)
    const newest = versions.reduce((a, b) => (b.rank > a.rank ? b : a))
    t.true(newest.rank <= 2017000, `${file} needs ${newest.name}`)
    t.log(`${file}: newest glibc symbol version ${newest.name}`)
  }
})

test.serial('attw finds the packed types right for every ESM resolution, and CommonJS only lacking require(esm), which Node >= 20.19 has', (t) => {
  const attw = (...args: string[]) => spawnSync(process.execPath, [join(root, 'node_modules', '@arethetypeswrong', 'cli', 'dist', 'index.js'), join(root, 'pack', rootTarball), '--format', 'json', ...args], { encoding: 'utf8' })
  // The esm-only profile leaves out node10 and node16-cjs, the resolutions without require(esm);
  // the CommonJS consumer of the test above runs require('kvengine') for real.
  const esm = attw('--profile', 'esm-only')
  t.is(esm.status, 0, esm.stdout + esm.stderr)
  const all = JSON.parse(attw().stdout) as { problems: Record<string, { resolutionKind: string }[]> }
  t.deepEqual(Object.keys(all.problems), ['CJSResolvesToESM'])
  t.deepEqual(all.problems.CJSResolvesToESM.map((p) => p.resolutionKind), ['node16-cjs'])
})

const QEMU = process.env.QEMU_X86_64 ?? '/usr/bin/qemu-x86_64'

/** Node under Debian's qemu-user emulating `cpu`, in the user's project. CPUID answers for that
 * CPU, while /proc/cpuinfo still describes this machine's. */
function underQemu(cpu: string, script: string) {
  return spawnSync(QEMU, ['-cpu', cpu, process.execPath, '--input-type=module', '-e', script], { cwd: project, env: userEnv, encoding: 'utf8' })
}

test.serial('on CPUs older than x86-64-v3 (qemu: Nehalem, Ivy Bridge) importing kvengine throws UNSUPPORTED naming what is missing, where the bare addon dies with SIGILL', (t) => {
  if (!existsSync(QEMU)) return t.fail(`no qemu-x86_64 at ${QEMU}: run "apt-get install -y qemu-user" (.ci/run does) or set QEMU_X86_64`)
  const addon = join(project, 'node_modules', 'kvengine-linux-x64-gnu', 'kvengine.linux-x64-gnu.node')
  const bare = underQemu('Nehalem', `import { createRequire } from 'node:module'; createRequire(import.meta.url)(${JSON.stringify(addon)})`)
  t.is(bare.signal, 'SIGILL', `the addon itself, required on Nehalem: status ${bare.status}, ${bare.stderr}`)

  const importing = `try { await import('kvengine'); console.log('loaded') } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }`
  for (const [cpu, missing] of [['Nehalem', ['avx', 'avx2', 'fma', 'f16c']], ['IvyBridge', ['avx2', 'bmi2', 'fma']]] as const) {
    const r = underQemu(cpu, importing)
    t.is(r.status, 0, `${cpu}: signal ${r.signal}, ${r.stderr}`)
    const error = JSON.parse(r.stdout) as { code: string; message: string }
    t.is(error.code, 'UNSUPPORTED', r.stdout)
    for (const feature of missing) t.regex(error.message, new RegExp(`lacks [^;]*\\b${feature}\\b`), `${cpu}: ${error.message}`)
    t.notRegex(error.message, /npm run build|cargo/, 'an npm user gets no build advice')
  }
  // A v3 CPU is let through to the addon itself.
  t.is(underQemu('Haswell', importing).stdout.trim(), 'loaded')
})

test.serial('npm version moves every platform package to the new version, the CUDA one too', (t) => {
  const repo = join(work, 'repo')
  mkdirSync(repo)
  cpSync(join(root, 'package.json'), join(repo, 'package.json'))
  cpSync(join(root, 'npm'), join(repo, 'npm'), { recursive: true, filter: (src) => !src.endsWith('.node') })
  symlinkSync(join(root, 'node_modules'), join(repo, 'node_modules'))
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: repo })
  git('init', '-q')
  git('add', 'package.json', 'npm')
  git('commit', '-qm', 'init')
  execFileSync('npm', ['version', '9.8.7', '--no-git-tag-version'], { cwd: repo, stdio: 'ignore' })
  for (const dir of ['.', ...execFileSync('ls', [join(repo, 'npm')], { encoding: 'utf8' }).trim().split('\n').map((d) => `npm/${d}`)]) {
    t.is(JSON.parse(readFileSync(join(repo, dir, 'package.json'), 'utf8')).version, '9.8.7', dir)
  }
  t.regex(git('status', '--porcelain').toString(), /^M {2}npm\/linux-x64-gnu-cuda\/package\.json$/m, 'the version script stages what it bumps')
})
