import type { PyValue } from './PyValue.js'
import { PythonError } from './PythonError.js'

/** The binary operators the calculator's character set can spell (`**` is refused up front). */
type BinaryOperator = '+' | '-' | '*' | '/' | '//'

const MAX_EXACT = 2n ** 53n
// Sequence repetition takes a C ssize_t: CPython raises OverflowError past it.
const MAX_SSIZE = 2n ** 63n - 1n

/** `a op b` with CPython's int, float and tuple semantics; throws PythonError where it raises. */
export function applyBinary(op: BinaryOperator, a: PyValue, b: PyValue): PyValue {
  if (Array.isArray(a) || Array.isArray(b)) return tupleOperation(op, a, b)
  if (typeof a === 'bigint' && typeof b === 'bigint') {
    switch (op) {
      case '+': return a + b
      case '-': return a - b
      case '*': return a * b
      case '/': return trueDivideInts(a, b)
      case '//': return floorDivideInts(a, b)
    }
  }
  const x = toFloat(a as bigint | number)
  const y = toFloat(b as bigint | number)
  switch (op) {
    case '+': return x + y
    case '-': return x - y
    case '*': return x * y
    case '/':
      if (y === 0) throw new PythonError('float division by zero')
      return x / y
    case '//': return floorDivideFloats(x, y)
  }
}

/** `()` supports only `() + ()` and repetition by an int. */
function tupleOperation(op: BinaryOperator, a: PyValue, b: PyValue): PyValue {
  if (op === '+' && Array.isArray(a) && Array.isArray(b)) return []
  const count = Array.isArray(a) ? b : a
  if (op === '*' && typeof count === 'bigint') {
    if (count > MAX_SSIZE || count < -MAX_SSIZE - 1n) throw new PythonError("cannot fit 'int' into an index-sized integer")
    return []
  }
  throw new PythonError(`unsupported operand type(s) for ${op} involving a tuple`)
}

/** PyLong_AsDouble: correctly rounded, OverflowError when it does not fit. */
function toFloat(v: bigint | number): number {
  if (typeof v === 'number') return v
  const x = Number(v)
  if (!Number.isFinite(x)) throw new PythonError('int too large to convert to float')
  return x
}

function floorDivideInts(a: bigint, b: bigint): bigint {
  if (b === 0n) throw new PythonError('integer division or modulo by zero')
  const q = a / b
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q
}

/** CPython's _float_div_mod, so signs of zero, infinities and NaNs come out as Python's. */
function floorDivideFloats(x: number, y: number): number {
  if (y === 0) throw new PythonError('float floor division by zero')
  const mod = x % y // JavaScript's % on numbers is C's fmod
  let div = (x - mod) / y
  // C tests doubles against zero, where NaN counts as true.
  if (mod !== 0 && y < 0 !== mod < 0) div -= 1
  if (div === 0) {
    const quotient = x / y
    return quotient < 0 || Object.is(quotient, -0) ? -0 : 0
  }
  let floor = Math.floor(div)
  if (div - floor > 0.5) floor += 1
  return floor
}

function bitLength(n: bigint): number {
  return n === 0n ? 0 : n.toString(2).length
}

/**
 * CPython's long_true_divide: int / int correctly rounded to the nearest float (ties to even),
 * however large the operands, with subnormal results rounded once, at their own precision.
 */
function trueDivideInts(a: bigint, b: bigint): number {
  if (b === 0n) throw new PythonError('division by zero')
  const n = a < 0n ? -a : a
  const d = b < 0n ? -b : b
  // Both exact as floats: IEEE division is already correctly rounded.
  if (n <= MAX_EXACT && d <= MAX_EXACT) return Number(a) / Number(b)
  const negative = a < 0n !== b < 0n
  if (n === 0n) return negative ? -0 : 0
  // q = n·2^k / d gets 55-56 bits, but never bits below 2^-1076 (two under the least subnormal).
  const k = Math.min(55 - (bitLength(n) - bitLength(d)), 1076)
  const [num, den] = k >= 0 ? [n << BigInt(k), d] : [n, d << BigInt(-k)]
  const q = num / den
  const sticky = num % den !== 0n
  // Keep 53 bits, or fewer where the result is subnormal; at least two bits are dropped.
  const drop = Math.max(bitLength(q) - 53, k - 1074)
  let kept = q >> BigInt(drop)
  const rest = q - (kept << BigInt(drop))
  const half = 1n << BigInt(drop - 1)
  if (rest > half || (rest === half && (sticky || (kept & 1n) === 1n))) kept += 1n
  const magnitude = Number(kept) * 2 ** (drop - k)
  if (!Number.isFinite(magnitude)) throw new PythonError('integer division result too large for a float')
  return negative ? -magnitude : magnitude
}
