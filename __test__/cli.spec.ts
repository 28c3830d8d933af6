// The command line as a user runs it: the compiled bin, real processes, real pipes.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'

import test from 'ava'

import { Model } from '../index.js'
import { hashFile } from '../src/hashFile.js'
import { modelPath, root } from './models.js'

const bin = join(root, 'dist', 'src', 'cli.js')

interface Run {
  code: number | null
  stdout: string
  stderr: string
  /** How many separate stdout writes arrived before the process exited. */
  chunks: number
}

function run(args: string[], input?: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
    const out: Run = { code: null, stdout: '', stderr: '', chunks: 0 }
    child.stdout.on('data', (d: Buffer) => {
      out.stdout += d.toString()
      out.chunks++
    })
    child.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()))
    child.on('close', (code) => resolve({ ...out, code }))
    child.stdin.end(input ?? '')
  })
}

test.serial('generate streams a greedy completion as it is produced', async (t) => {
  const r = await run(['generate', '-m', modelPath('Q8_0'), '--raw', '-p', 'The capital of France is', '--temperature', '0', '--max-tokens', '24'])
  t.is(r.code, 0, r.stderr)
  t.true(r.stdout.startsWith('The capital of France is'))
  t.regex(r.stdout, /Paris/)
  t.true(r.chunks > 5, `stdout arrived in ${r.chunks} writes`)
  t.regex(r.stderr, /tokens\/s/)
})

test.serial('generate with --speculative ngram or --model-draft prints what plain greedy decoding prints; bad flags are clear errors', async (t) => {
  const base = ['generate', '-m', modelPath('Q8_0'), '-p', 'Repeat exactly: the red fox, the red fox, the red fox.', '--temperature', '0', '--max-tokens', '32']
  const plain = await run(base)
  t.is(plain.code, 0, plain.stderr)
  for (const flags of [['--speculative', 'ngram'], ['--model-draft', modelPath('Q4_1'), '--draft-max', '3']]) {
    const r = await run([...base, ...flags])
    t.is(r.code, 0, r.stderr)
    t.is(r.stdout, plain.stdout, flags.join(' '))
  }
  const wrong = await run([...base, '--speculative', 'eagle'])
  t.is(wrong.code, 1)
  t.regex(wrong.stderr, /--speculative takes ngram .*got 'eagle'/)
  const served = await run(['serve', '-m', modelPath('Q8_0'), '--speculative', 'ngram'])
  t.is(served.code, 1)
  t.regex(served.stderr, /serve does not decode speculatively yet; leave out --speculative/)
})

test.serial('--device: the model says where it runs; cuda on a build without CUDA and an unknown device are clear errors', async (t) => {
  const cpu = await run(['generate', '-m', modelPath('Q8_0'), '--device', 'cpu', '-p', 'Hi', '--max-tokens', '1'])
  t.is(cpu.code, 0, cpu.stderr)
  t.regex(cpu.stderr, /loaded .* on cpu\)/)
  const cuda = await run(['generate', '-m', modelPath('Q8_0'), '--device', 'cuda', '-p', 'Hi', '--max-tokens', '1'])
  t.is(cuda.code, 1)
  t.regex(cuda.stderr, /\[UNSUPPORTED\]: this build of kvengine has no CUDA support/)
  const gpu = await run(['serve', '-m', modelPath('Q8_0'), '--device', 'gpu'])
  t.is(gpu.code, 1)
  t.regex(gpu.stderr, /device must be 'cpu' or 'cuda', got 'gpu'/)
})

test.serial('--chat-template-file renders chats with that template in place of the model\'s; a missing file is a clear error', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kvengine-template-'))
  t.teardown(() => rmSync(dir, { recursive: true }))
  const file = join(dir, 't.jinja')
  writeFileSync(file, "{{ raise_exception('this came from the file: ' ~ messages[0]['content']) }}")
  const r = await run(['generate', '-m', modelPath('Q8_0'), '--chat-template-file', file, '-p', 'Hi', '--max-tokens', '1'])
  t.is(r.code, 1)
  t.regex(r.stderr, /this came from the file: Hi/)
  const missing = await run(['generate', '-m', modelPath('Q8_0'), '--chat-template-file', join(dir, 'none.jinja'), '-p', 'Hi'])
  t.is(missing.code, 1)
  t.regex(missing.stderr, /cannot read --chat-template-file .*none\.jinja/)
})

test.serial('chat keeps the history in the KV cache between turns', async (t) => {
  const r = await run(['chat', '-m', modelPath('Q8_0'), '--temperature', '0', '--max-tokens', '24'], 'Hi, my name is Ada.\nWhat is my name?\n/exit\n')
  t.is(r.code, 0, r.stderr)
  const turns = [...r.stderr.matchAll(/reused (\d+) cached tokens, prefilled (\d+)/g)].map((m) => [Number(m[1]), Number(m[2])])
  t.is(turns.length, 2)
  t.is(turns[0][0], 0)
  t.true(turns[1][0] > turns[0][1], `turn 2 reused ${turns[1][0]} tokens of history instead of prefilling them again`)
  t.true(turns[1][1] < 20, `turn 2 prefilled only the new message (${turns[1][1]} tokens)`)
})

test.serial('a wrong model path is a clear error and exit code 1', async (t) => {
  const r = await run(['generate', '-m', '/nonexistent/model.gguf', '-p', 'x'])
  t.is(r.code, 1)
  t.regex(r.stderr, /\[NOT_FOUND\].*\/nonexistent\/model\.gguf/)
})

test.serial('convert writes a loadable file, reports progress, and writes the same bytes every run', async (t) => {
  const outs = [1, 2].map((n) => join(root, 'models', `cli-test-${n}.Q4_0.gguf`))
  for (const out of outs) {
    const r = await run(['convert', modelPath('Q8_0'), out, '--to', 'q4_0'])
    t.is(r.code, 0, r.stderr)
    t.regex(r.stderr, /converting 100%/)
  }
  // Files derived from a conversion (the random-weight models' tokenizer) are pinned by hash.
  const [first, second] = await Promise.all(outs.map(async (out) => (await hashFile(out)).digest('hex')))
  t.is(first, second, 'two conversions of one file differ')
  const g = await run(['generate', '-m', outs[0], '--raw', '-p', 'Hello', '--max-tokens', '4'])
  t.is(g.code, 0, g.stderr)
  t.regex(g.stderr, /gguf .*q4_0/)
  for (const out of outs) rmSync(out, { force: true })
})

test.serial('serve prints its URL, answers, logs one line per request and exits cleanly on SIGTERM', async (t) => {
  const child = spawn(process.execPath, [bin, 'serve', '-m', modelPath('Q8_0'), '--port', '0', '--max-rows', '2'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string]
  const url = /^kvengine serving .* at (http:\/\/127\.0\.0\.1:\d+\/)$/.exec(line)?.[1]
  t.truthy(url, line)
  const res = await fetch(`${url}v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'The capital of France is', max_tokens: 4, temperature: 0 }) })
  t.is(res.status, 200)
  t.is(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens, 4)
  child.kill('SIGTERM')
  const [code] = await once(child, 'exit')
  t.is(code, 0, stderr)
  t.regex(stderr, /POST \/v1\/completions 200 \d+ms n=1 prompt=\d+ cached=0 completion=4/)
})

test.serial('SIGTERM under load: every client gets [DONE] or an error answer, and the process exits 0 within the deadline', async (t) => {
  const args = ['serve', '-m', modelPath('Q8_0'), '--port', '0', '--max-rows', '4', '--shutdown-timeout', '2']
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string]
  const url = /at (http:\S+)$/.exec(line)?.[1] as string
  const ask = (stream: boolean) =>
    fetch(`${url}v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Write a very long story.' }], max_tokens: 1500, temperature: 0.8, stream }),
    }).then(async (res) => ({ status: res.status, body: await res.text() }))
  // Four streams take every row; two streams and two whole requests wait in the queue.
  const clients = [...Array.from({ length: 6 }, () => ask(true)), ask(false), ask(false)]
  for (let i = 0; i < 500; i++) {
    const m = await (await fetch(`${url}metrics`)).text()
    if (/^kvengine_running_rows 4$/m.test(m) && /^kvengine_queued_rows 4$/m.test(m)) break
    await new Promise((r) => setTimeout(r, 20))
  }
  const signalled = performance.now()
  child.kill('SIGTERM')
  const [code] = await once(child, 'exit')
  const took = performance.now() - signalled
  const answers = await Promise.all(clients)
  t.is(code, 0, stderr)
  t.true(took < 2000 + 1500, `exited ${took.toFixed(0)} ms after SIGTERM`)
  for (const [i, a] of answers.entries()) {
    if (i < 6) {
      t.is(a.status, 200)
      t.true(a.body.endsWith('data: [DONE]\n\n'), `stream ${i} ends with [DONE]: ...${a.body.slice(-120)}`)
      t.regex(a.body, /"finish_reason":"(stop|length)"|"code":"shutting_down"/, `stream ${i} finished or was told why it ended`)
    } else {
      t.is(a.status, 503, a.body)
      t.like(JSON.parse(a.body), { error: { code: 'shutting_down' } })
    }
  }
  t.false(/ 499 /.test(stderr), 'no client is logged as having left')
})

test.serial('chat with a nanochat checkpoint in a terminal: two turns, each with a calculator call and its forced output, the history kept', async (t) => {
  // The d4 that scripts/nanochat/make_engine_fixtures.py trained on this very two-turn chat;
  // greedy, it calls the calculator once per turn.
  const checkpoint = join(root, 'crate', 'tests', 'fixtures', 'nanochat', 'chatsft_checkpoints', 'd4')
  const turns = ['What is 12+7?', 'And 5-8?']
  // `script` gives the CLI a pseudo-terminal, as a user's shell would.
  const command = [process.execPath, bin, 'chat', '-m', checkpoint, '--temperature', '0', '--max-tokens', '64'].map((a) => `'${a}'`).join(' ')
  const child = spawn('script', ['-qfec', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] })
  let transcript = ''
  let exited = false
  child.stdout.on('data', (d: Buffer) => (transcript += d.toString()))
  child.on('exit', () => (exited = true))
  // The next prompt, or the end of a process that failed before it.
  const prompted = async (count: number) => {
    while (!exited && (transcript.match(/> /g) ?? []).length < count) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  for (const [i, turn] of turns.entries()) {
    await prompted(i + 1)
    child.stdin.write(`${turn}\n`)
  }
  await prompted(3)
  child.stdin.write('/exit\n')
  const [code] = (await once(child, 'close')) as [number]
  t.is(code, 0, transcript)
  for (const answer of [
    'Adding. <|python_start|>12+7<|python_end|><|output_start|>19<|output_end|> It is 19.',
    'Now <|python_start|>5-8<|python_end|><|output_start|>-3<|output_end|> is negative.',
  ]) {
    t.true(transcript.includes(answer), transcript)
  }
  const cacheUse = [...transcript.matchAll(/reused (\d+) cached tokens, prefilled (\d+)/g)].map((m) => [Number(m[1]), Number(m[2])])
  t.is(cacheUse.length, 2, transcript)
  // Turn 2 reuses turn 1's prompt and reply (forced tokens included) and prefills the reply's end and the new turn.
  const model = await Model.load(checkpoint)
  const secondTurn = model.tokenizer.encode(turns[1], { addBos: false }).length
  model.dispose()
  t.true(cacheUse[1][0] >= cacheUse[0][1] + 20, transcript)
  t.is(cacheUse[1][1], 1 + 1 + secondTurn + 2, 'assistant_end, user_start, the text, user_end and assistant_start')
  t.log(transcript.replace(/\r/g, ''))
})
