#!/usr/bin/env node
// Builds kvengine's CUDA variant on a machine with no GPU and no CUDA install: NVIDIA's PyPI
// wheels (pinned to CUDA 13.0, what the GPU machines' driver supports) are unpacked into a
// CUDA_HOME under .cache/cuda, and cargo builds against it for compute capability 9.0 (H100/H200).
// Idempotent: wheels, unpacking and the toolkit layout are reused when present.
//
//   node scripts/build-cuda.mjs            the napi addon -> npm/linux-x64-gnu-cuda/
//   node scripts/build-cuda.mjs --tests    also the GPU test and bench binaries -> .cache/cuda/gpu-check/
//   node scripts/build-cuda.mjs --env      only prints the environment, for running cargo by hand
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const cache = join(root, '.cache', 'cuda')
const wheels = join(cache, 'wheels')
const unpacked = join(cache, 'unpacked')
const cudaHome = join(unpacked, 'nvidia', 'cu13')

// Pinned: the driver on the GPU machines supports CUDA 13.0, and cudarc's version cfg follows nvcc.
const WHEELS = [
  'nvidia-cuda-nvcc==13.0.88',
  'nvidia-nvvm==13.0.88',
  'nvidia-cuda-crt==13.0.88',
  'nvidia-cuda-cccl==13.0.85',
  'nvidia-cuda-runtime==13.0.96',
  'nvidia-cuda-nvrtc==13.0.88',
  'nvidia-cublas==13.0.2.14',
  'nvidia-curand==10.4.0.35',
]
// Libraries linked by name (`-lcudart`), which the wheels ship only with their soname suffix.
const UNVERSIONED = { cudart: 'libcudart.so.13', cublas: 'libcublas.so.13', cublasLt: 'libcublasLt.so.13', curand: 'libcurand.so.10', nvrtc: 'libnvrtc.so.13' }

const log = (msg) => console.error(`build-cuda: ${msg}`)
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { stdio: 'inherit', cwd: root, ...opts })

function fetchWheels() {
  mkdirSync(wheels, { recursive: true })
  const have = readdirSync(wheels)
  const missing = WHEELS.filter((spec) => {
    const [name, version] = spec.split('==')
    return !have.some((f) => f.startsWith(`${name.replaceAll('-', '_')}-${version}-`))
  })
  if (missing.length === 0) return log('wheels: cached')
  log(`downloading ${missing.join(' ')}`)
  const platforms = ['manylinux_2_27_x86_64', 'manylinux_2_17_x86_64', 'manylinux2014_x86_64', 'manylinux_2_12_x86_64', 'manylinux2010_x86_64']
  run('python3', ['-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '--python-version', '3.11', ...platforms.flatMap((p) => ['--platform', p]), '-d', wheels, ...missing])
}

function unpack() {
  const marker = join(unpacked, '.done')
  const want = readdirSync(wheels).filter((f) => f.endsWith('.whl')).sort().join('\n')
  if (existsSync(marker) && readFileSync(marker, 'utf8') === want) return log('toolkit: unpacked')
  rmSync(unpacked, { recursive: true, force: true })
  mkdirSync(unpacked, { recursive: true })
  for (const whl of want.split('\n')) {
    log(`unpacking ${whl}`)
    run('python3', ['-m', 'zipfile', '-e', join(wheels, whl), unpacked])
  }
  // zipfile drops the executable bit.
  for (const dir of ['bin', join('nvvm', 'bin')]) {
    for (const f of readdirSync(join(cudaHome, dir), { withFileTypes: true })) if (f.isFile()) run('chmod', ['+x', join(cudaHome, dir, f.name)])
  }
  writeFileSync(marker, want)
}

function layout() {
  const lib = join(cudaHome, 'lib')
  if (!existsSync(join(cudaHome, 'lib64'))) symlinkSync('lib', join(cudaHome, 'lib64'))
  for (const [name, file] of Object.entries(UNVERSIONED)) {
    const link = join(lib, `lib${name}.so`)
    if (!existsSync(link)) symlinkSync(file, link)
  }
  const stub = join(lib, 'stubs', 'libcuda.so')
  if (!existsSync(stub)) buildDriverStub(stub)
}

// The wheels carry no libcuda (the driver provides it) but cudarc links it by name. A stub that
// defines every driver entry point cudarc declares satisfies the linker; its soname makes the
// binary load the real driver's libcuda.so.1 at run time.
function buildDriverStub(stub) {
  const meta = JSON.parse(execFileSync('cargo', ['metadata', '--format-version', '1', '--manifest-path', join(root, 'crate', 'Cargo.toml'), '--features', 'cuda'], { cwd: root, maxBuffer: 1 << 28 }))
  const cudarc = meta.packages.find((p) => p.name === 'cudarc')
  if (!cudarc) throw new Error('cudarc is not in the dependency graph of the cuda feature')
  const sys = readFileSync(join(dirname(cudarc.manifest_path), 'src', 'driver', 'sys', 'mod.rs'), 'utf8')
  const names = [...new Set([...sys.matchAll(/^pub unsafe fn (cu\w+)\(/gm)].map((m) => m[1]))]
  log(`driver stub: ${names.length} entry points from cudarc ${cudarc.version}`)
  mkdirSync(dirname(stub), { recursive: true })
  // 34 is CUDA_ERROR_STUB_LIBRARY, should the stub ever be loaded in place of the driver.
  const src = names.map((n) => `int ${n}(void) { return 34; }`).join('\n') + '\n'
  const cFile = join(cache, 'libcuda_stub.c')
  writeFileSync(cFile, src)
  run('gcc', ['-shared', '-fPIC', '-O0', '-Wl,-soname,libcuda.so.1', '-o', stub, cFile])
}

function cudaEnv() {
  return {
    ...process.env,
    CUDA_HOME: cudaHome,
    CUDA_PATH: cudaHome,
    NVCC: join(cudaHome, 'bin', 'nvcc'),
    PATH: `${join(cudaHome, 'bin')}:${process.env.PATH}`,
    CUDA_COMPUTE_CAP: process.env.CUDA_COMPUTE_CAP ?? '90',
    CUDARC_CUDA_VERSION: '13000',
    LIBRARY_PATH: `${join(cudaHome, 'lib', 'stubs')}:${join(cudaHome, 'lib')}`,
  }
}

function buildAddon(env) {
  const outDir = join(root, 'npm', 'linux-x64-gnu-cuda')
  const staging = join(cache, 'addon')
  log('building the napi addon with --features cuda')
  run('npx', ['napi', 'build', '--platform', '--release', '--features', 'cuda', '--manifest-path', 'crate/Cargo.toml', '-o', staging, '--no-js', '--dts', 'index.d.ts'], { env })
  const built = readdirSync(staging).find((f) => f.endsWith('.node'))
  if (!built) throw new Error(`napi build left no .node in ${staging}`)
  copyFileSync(join(staging, built), join(outDir, 'kvengine.linux-x64-gnu-cuda.node'))
  log(`wrote npm/linux-x64-gnu-cuda/kvengine.linux-x64-gnu-cuda.node`)
}

// The GPU check (scripts/gpu-check.sh) runs these on the GPU machine, which has no Rust toolchain.
function buildGpuCheck(env) {
  const out = join(cache, 'gpu-check')
  mkdirSync(out, { recursive: true })
  log('building the GPU test and bench binaries with --features cuda')
  const args = ['build', '--release', '--no-default-features', '--features', 'cuda', '--manifest-path', 'crate/Cargo.toml', '--test', 'cuda', '--example', 'cuda_bench', '--message-format', 'json-render-diagnostics']
  const lines = execFileSync('cargo', args, { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 28 }).toString().split('\n')
  for (const line of lines) {
    if (!line.startsWith('{')) continue
    const msg = JSON.parse(line)
    if (msg.reason !== 'compiler-artifact' || !msg.executable) continue
    const name = msg.target.kind.includes('test') ? 'cuda-tests' : msg.target.name
    copyFileSync(msg.executable, join(out, name))
    run('strip', [join(out, name)])
    log(`wrote .cache/cuda/gpu-check/${name}`)
  }
  // Packed, the pair is a few MB; unpacked it is near the 64 MiB a device call may carry.
  run('tar', ['-cJf', join(cache, 'gpu-check.tar.xz'), '-C', cache, 'gpu-check'])
  log('wrote .cache/cuda/gpu-check.tar.xz')
}

const args = new Set(process.argv.slice(2))
fetchWheels()
unpack()
layout()
const env = cudaEnv()
if (args.has('--env')) {
  for (const k of ['CUDA_HOME', 'NVCC', 'CUDA_COMPUTE_CAP', 'CUDARC_CUDA_VERSION', 'LIBRARY_PATH']) console.log(`export ${k}=${env[k]}`)
  console.log(`export PATH=${join(cudaHome, 'bin')}:$PATH`)
} else {
  run('nvcc', ['--version'], { env })
  if (!args.has('--tests-only')) buildAddon(env)
  if (args.has('--tests') || args.has('--tests-only')) buildGpuCheck(env)
}
