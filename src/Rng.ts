/**
 * xoshiro128** seeded through splitmix32: small, fast, and reproducible across platforms, unlike
 * Math.random. Each row of a multi-sample generation gets its own stream from (seed, row).
 */
export class Rng {
  #s0: number
  #s1: number
  #s2: number
  #s3: number

  /** `stream` selects one of many independent sequences for the same seed. */
  constructor(seed: number, stream = 0) {
    let x = (seed >>> 0) ^ Math.imul(stream, 0x632be5ab)
    const hi = (Math.floor(seed / 2 ** 32) >>> 0) ^ stream
    const next = () => {
      x = (x + 0x9e3779b9) | 0
      let z = x ^ hi
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
      return (z ^ (z >>> 16)) >>> 0
    }
    this.#s0 = next()
    this.#s1 = next()
    this.#s2 = next()
    this.#s3 = next() | 1 // an all-zero state would stay zero
  }

  /** An independent, reproducible stream for row `row` of a generation seeded with `seed`. */
  static forRow(seed: number, row: number): Rng {
    return new Rng(seed, row + 1)
  }

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

  /** Uniform in [0, 1) with 32 bits of resolution. */
  nextFloat(): number {
    return this.nextUint32() / 2 ** 32
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k))
}
