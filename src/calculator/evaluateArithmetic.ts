import { applyBinary } from './applyBinary.js'
import type { PyValue } from './PyValue.js'
import { PythonError } from './PythonError.js'

type BinaryOperator = Parameters<typeof applyBinary>[0]

// CPython 3.11's limits, measured by calling use_calculator from a shallow stack: its tokenizer
// allows 200 open parentheses; its AST optimizer recurses at most about 3 × the recursion limit
// (1000) deep, which leaves 2988 nodes on one root-to-leaf path. Beyond them Python raises, so
// upstream answers None; matching them also bounds our own recursion.
const MAX_OPEN_PARENS = 200
const MAX_AST_DEPTH = 2988
// Python 3.11 refuses int literals (and str() of ints) longer than this: sys.int_info.default_max_str_digits.
const MAX_INT_DIGITS = 4300

/**
 * Evaluates an expression over `0123456789*+-/.() ` as CPython's `eval` would: ints of any size,
 * `/` true division, `//` floor division, unary signs, parentheses, `()`. A precedence-climbing
 * parser that evaluates as it goes; binary chains and sign runs are loops, so only parentheses
 * recurse. Throws PythonError wherever Python raises.
 */
export function evaluateArithmetic(text: string): PyValue {
  const parser = new ArithmeticParser(text)
  const value = parser.expression()
  if (parser.peek() !== '') throw new PythonError(`invalid syntax at '${parser.peek()}'`)
  return value
}

class ArithmeticParser {
  readonly #text: string
  #pos = 0
  #token = ''
  #openParens = 0
  /** AST depth of the subexpression just parsed: parsers return values, this says how deep. */
  #depth = 0

  constructor(text: string) {
    this.#text = text
    this.#advance()
  }

  peek(): string {
    return this.#token
  }

  /** expression := term (('+' | '-') term)* */
  expression(): PyValue {
    let value = this.#term()
    let depth = this.#depth
    while (this.#token === '+' || this.#token === '-') {
      const op = this.#token as BinaryOperator
      this.#advance()
      const right = this.#term()
      depth = this.#nodeDepth(depth, this.#depth)
      value = applyBinary(op, value, right)
    }
    this.#depth = depth
    return value
  }

  /** term := factor (('*' | '/' | '//') factor)* */
  #term(): PyValue {
    let value = this.#factor()
    let depth = this.#depth
    while (this.#token === '*' || this.#token === '/' || this.#token === '//') {
      const op = this.#token as BinaryOperator
      this.#advance()
      const right = this.#factor()
      depth = this.#nodeDepth(depth, this.#depth)
      value = applyBinary(op, value, right)
    }
    this.#depth = depth
    return value
  }

  /** factor := ('+' | '-')* atom: each sign is one unary node. */
  #factor(): PyValue {
    let negations = 0
    let signs = 0
    while (this.#token === '+' || this.#token === '-') {
      if (this.#token === '-') negations++
      signs++
      this.#advance()
    }
    const value = this.#atom()
    this.#depth = this.#nodeDepth(this.#depth + signs - 1, 0)
    if (signs === 0) return value
    if (Array.isArray(value)) throw new PythonError("bad operand type for unary op: 'tuple'")
    if (negations % 2 === 0) return value
    return typeof value === 'bigint' ? -value : -(value as number)
  }

  /** atom := number | '(' ')' | '(' expression ')'; a call on the result would raise TypeError. */
  #atom(): PyValue {
    const token = this.#token
    let value: PyValue
    if (token === '(') {
      if (++this.#openParens > MAX_OPEN_PARENS) throw new PythonError('too many nested parentheses')
      this.#advance()
      if (this.#token === ')') {
        value = []
        this.#depth = 1
      } else {
        value = this.expression()
      }
      if (this.#token !== ')') throw new PythonError("'(' was never closed")
      this.#openParens--
    } else if (/^[0-9.]/.test(token)) {
      value = parseNumber(token)
      this.#depth = 1
    } else {
      throw new PythonError(token === '' ? 'unexpected end of expression' : `invalid syntax at '${token}'`)
    }
    this.#advance()
    if (this.#token === '(') throw new PythonError(`'${typeof value === 'bigint' ? 'int' : Array.isArray(value) ? 'tuple' : 'float'}' object is not callable`)
    return value
  }

  /** The depth of a node over children this deep, checked against CPython's limit. */
  #nodeDepth(left: number, right: number): number {
    const depth = Math.max(left, right) + 1
    if (depth > MAX_AST_DEPTH) throw new PythonError('maximum recursion depth exceeded during compilation')
    return depth
  }

  /** Python's tokenizer over the allowed characters; '' at the end. */
  #advance(): void {
    const text = this.#text
    while (text[this.#pos] === ' ') this.#pos++
    const start = this.#pos
    const c = text[start]
    if (c === undefined) {
      this.#token = ''
      return
    }
    if (isDigit(c) || (c === '.' && isDigit(text[start + 1]))) {
      let end = start
      while (isDigit(text[end])) end++
      if (text[end] === '.') {
        end++
        while (isDigit(text[end])) end++
      }
      this.#pos = end
    } else {
      this.#pos += (c === '*' || c === '/') && text[start + 1] === c ? 2 : 1
    }
    this.#token = text.slice(start, this.#pos)
  }
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9'
}

/** A decimal literal: int unless it has a point (the character set has no exponents). */
function parseNumber(token: string): PyValue {
  // JavaScript's decimal-string conversion is correctly rounded, as Python's is.
  if (token.includes('.')) return Number(token)
  const significant = token.replace(/^0+/, '')
  if (significant.length > 0 && significant.length < token.length) {
    throw new PythonError('leading zeros in decimal integer literals are not permitted')
  }
  if (significant.length > MAX_INT_DIGITS) throw new PythonError('Exceeds the limit (4300 digits) for integer string conversion')
  return BigInt(token)
}
