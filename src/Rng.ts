import { KvEngineError } from './KvEngineError.js'

const GOLDEN = 0x9e3779b97f4a7c15n

/**
 * xoshiro128** seeded through splitmix64: fast, and unlike Math.random reproducible across
 * platforms and runs. Seeding uses BigInt, so any 64-bit seed works; drawing stays in 32-bit
 * integer math, so the hot path never allocates.
 */
export class Rng {
  #s0: number
  #s1: number
  #s2: number
  #s3: number

  /** Any integer; numbers and bigints are taken modulo 2^64. */
  constructor(seed: number | bigint) {
    let x = toUint64(seed)
    // splitmix64 is a bijection of its counter, so two consecutive outputs are never both zero
    // and xoshiro never gets its absorbing all-zero state.
    x = BigInt.asUintN(64, x + GOLDEN)
    const a = mix64(x)
    x = BigInt.asUintN(64, x + GOLDEN)
    const b = mix64(x)
    this.#s0 = Number(a & 0xffffffffn) | 0
    this.#s1 = Number(a >> 32n) | 0
    this.#s2 = Number(b & 0xffffffffn) | 0
    this.#s3 = Number(b >> 32n) | 0
  }

  /**
   * The stream for row `rowIndex` of a generation seeded with `seed`: the same pair always
   * gives the same stream, so one row reproduces no matter how many others run beside it.
   * Hashing (seed, row) together keeps row 1 of seed s apart from row 0 of seed s + 1.
   */
  static forRow(seed: number | bigint, rowIndex: number): Rng {
    if (!Number.isSafeInteger(rowIndex) || rowIndex < 0) {
      throw new KvEngineError('INVALID_ARGUMENT', `rowIndex must be a non-negative integer, got ${String(rowIndex)}`)
    }
    return new Rng(mix64(BigInt.asUintN(64, mix64(toUint64(seed)) + BigInt(rowIndex) * GOLDEN)))
  }

  /** Uniform on the 32-bit unsigned integers. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.#s1, 5), 7), 9) >>> 0
    const t = this.#s1 << 9
    this.#s2 ^= this.#s0
    this.#s3 ^= this.#s1
    this.#s1 ^= this.#s2
    this.#s0 ^= this.#s3
    this.#s2 ^= t
    this.#s3 = rotl(this.#s3, 11)
    return result
  }

  /** Uniform in [0, 1), 32 bits of resolution: finer than any probability a sampler acts on. */
  nextFloat(): number {
    return this.nextUint32() / 4294967296
  }
}

function toUint64(seed: number | bigint): bigint {
  if (typeof seed === 'bigint') return BigInt.asUintN(64, seed)
  if (!Number.isInteger(seed)) {
    throw new KvEngineError('INVALID_ARGUMENT', `seed must be an integer, got ${String(seed)}`)
  }
  return BigInt.asUintN(64, BigInt(seed))
}

/** splitmix64's finaliser: a bijection on 64 bits that spreads every input bit over the output. */
function mix64(z: bigint): bigint {
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n)
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn)
  return z ^ (z >> 31n)
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k))
}
