import { KvEngineError } from './KvEngineError.js'

/** A 64-bit unsigned integer as two unsigned 32-bit halves. */
type U64 = [hi: number, lo: number]

/** 2^64 / φ, splitmix64's counter step. */
const GOLDEN: U64 = [0x9e3779b9, 0x7f4a7c15]
const MIX1: U64 = [0xbf58476d, 0x1ce4e5b9]
const MIX2: U64 = [0x94d049bb, 0x133111eb]

/**
 * xoshiro128** seeded through splitmix64: fast, and unlike Math.random reproducible across
 * platforms and runs. All 64-bit arithmetic is done on pairs of 32-bit numbers, not BigInt:
 * Node 20's optimizing compiler aborts the process on BigInt code once it is hot (a
 * "RepresentationChangerError" after ~2,000 seedings), and seeding happens once per row.
 */
export class Rng {
  #s0 = 0
  #s1 = 0
  #s2 = 0
  #s3 = 0

  /** Any integer; numbers and bigints are taken modulo 2^64. */
  constructor(seed: number | bigint) {
    this.#seed(toUint64(seed))
  }

  #seed(seed: U64): void {
    // splitmix64 is a bijection of its counter, so two consecutive outputs are never both zero
    // and xoshiro never gets its absorbing all-zero state.
    let x = add64(seed, GOLDEN)
    const a = mix64(x)
    x = add64(x, GOLDEN)
    const b = mix64(x)
    this.#s0 = a[1] | 0
    this.#s1 = a[0] | 0
    this.#s2 = b[1] | 0
    this.#s3 = b[0] | 0
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
    const rng = new Rng(0)
    rng.#seed(mix64(add64(mix64(toUint64(seed)), mul64(fromInteger(rowIndex), GOLDEN))))
    return rng
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

function toUint64(seed: number | bigint): U64 {
  if (typeof seed === 'bigint') return fromBigInt(seed)
  if (!Number.isInteger(seed)) {
    throw new KvEngineError('INVALID_ARGUMENT', `seed must be an integer, got ${String(seed)}`)
  }
  return fromInteger(seed)
}

/** The only BigInt code: straight-line, returning numbers, which Node 20 optimizes safely. */
function fromBigInt(seed: bigint): U64 {
  const x = BigInt.asUintN(64, seed)
  return [Number(x >> 32n), Number(x & 0xffffffffn)]
}

/** An integer-valued double modulo 2^64; `%`, `/ 2^32` and the subtraction are all exact here. */
function fromInteger(x: number): U64 {
  const magnitude = Math.abs(x) % 18446744073709551616
  const hi = Math.floor(magnitude / 4294967296)
  const halves: U64 = [hi, magnitude - hi * 4294967296]
  return x < 0 ? add64([~halves[0] >>> 0, ~halves[1] >>> 0], [0, 1]) : halves
}

function add64([ahi, alo]: U64, [bhi, blo]: U64): U64 {
  const lo = alo + blo
  return [(ahi + bhi + (lo > 0xffffffff ? 1 : 0)) >>> 0, lo >>> 0]
}

/** The low 64 bits of a product: the low halves' full product from 16-bit limbs, every partial exact. */
function mul64([ahi, alo]: U64, [bhi, blo]: U64): U64 {
  const a0 = alo & 0xffff
  const a1 = alo >>> 16
  const b0 = blo & 0xffff
  const b1 = blo >>> 16
  const p00 = a0 * b0
  const p01 = a0 * b1
  const p10 = a1 * b0
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff)
  const lo = (((mid & 0xffff) << 16) | (p00 & 0xffff)) >>> 0
  const carry = a1 * b1 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16)
  return [(carry + Math.imul(ahi, blo) + Math.imul(alo, bhi)) >>> 0, lo]
}

/** x ^ (x >> k), for 0 < k < 32. */
function xorShift([hi, lo]: U64, k: number): U64 {
  return [(hi ^ (hi >>> k)) >>> 0, (lo ^ ((lo >>> k) | (hi << (32 - k)))) >>> 0]
}

/** splitmix64's finaliser: a bijection on 64 bits that spreads every input bit over the output. */
function mix64(z: U64): U64 {
  z = mul64(xorShift(z, 30), MIX1)
  z = mul64(xorShift(z, 27), MIX2)
  return xorShift(z, 31)
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k))
}
