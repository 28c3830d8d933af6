import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

import test from 'ava'

import { Rng } from '../src/Rng.js'

/**
 * The BigInt definition the 32-bit halves replace (splitmix64 seeding xoshiro128**), kept as the
 * reference: seeded streams must not change, or every recorded seeded output would.
 */
const reference = (() => {
  const GOLDEN = 0x9e3779b97f4a7c15n
  const mix64 = (z: bigint) => {
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n)
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn)
    return z ^ (z >> 31n)
  }
  const state = (seed: bigint) => {
    const a = mix64(BigInt.asUintN(64, seed + GOLDEN))
    const b = mix64(BigInt.asUintN(64, seed + 2n * GOLDEN))
    return [a & 0xffffffffn, a >> 32n, b & 0xffffffffn, b >> 32n].map((x) => Number(x) | 0)
  }
  const forRow = (seed: bigint, row: number) => state(mix64(BigInt.asUintN(64, mix64(BigInt.asUintN(64, seed)) + BigInt(row) * GOLDEN)))
  return { state, forRow }
})()

/** The first draws of xoshiro128** from a reference state. */
function draws([s0, s1, s2, s3]: number[], n: number): number[] {
  const rotl = (x: number, k: number) => (x << k) | (x >>> (32 - k))
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    out.push(Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0)
    const t = s1 << 9
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = rotl(s3, 11)
  }
  return out
}

const take = (rng: Rng, n: number) => Array.from({ length: n }, () => rng.nextUint32())

const SEEDS: (number | bigint)[] = [
  0, 1, 42, -1, -42, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, -(2 ** 53) + 1, 2 ** 53, 2 ** 63, 2 ** 64, 2 ** 64 + 2 ** 12, -(2 ** 70), 1e300, 123456789,
  0n, -1n, 2n ** 64n + 5n, 2n ** 63n, -(2n ** 100n) - 7n, 0xdeadbeefcafebaben,
]

test('seeded streams are the BigInt definition bit for bit, numbers and bigints, any magnitude or sign', (t) => {
  for (const seed of SEEDS) {
    const big = typeof seed === 'bigint' ? seed : BigInt(seed)
    t.deepEqual(take(new Rng(seed), 8), draws(reference.state(BigInt.asUintN(64, big)), 8), `seed ${seed}`)
    for (const row of [0, 1, 15, 1023, 2 ** 31, 2 ** 53 - 1]) {
      t.deepEqual(take(Rng.forRow(seed, row), 8), draws(reference.forRow(big, row), 8), `seed ${seed} row ${row}`)
    }
  }
})

test('a million row seedings in a fresh Node process: no optimizing-compiler abort, and the last stream still matches', (t) => {
  const rngModule = fileURLToPath(new URL('../src/Rng.ts', import.meta.url))
  const script = `
    const { Rng } = await import(${JSON.stringify(rngModule)})
    let x = 0
    for (let i = 0; i < 1e6; i++) x ^= Rng.forRow(i, i & 15).nextUint32()
    for (let i = 0; i < 1e5; i++) x ^= Rng.forRow(BigInt(i) << 40n, i & 15).nextUint32()
    const last = Rng.forRow(999999, 999999 & 15)
    console.log(JSON.stringify({ x, last: [last.nextUint32(), last.nextUint32()] }))`
  const run = spawnSync(process.execPath, ['--import=tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 120_000 })
  t.is(run.status, 0, `${run.signal ?? ''} ${run.stderr.slice(-2000)}`)
  const { last } = JSON.parse(run.stdout) as { last: number[] }
  t.deepEqual(last, draws(reference.forRow(999999n, 999999 & 15), 2))
})
