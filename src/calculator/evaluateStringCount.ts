import { PythonError } from './PythonError.js'

/** A Python str or bytes value; bytes print as their repr. */
interface PyString {
  text: string
  bytes: boolean
}
type Value = PyString | bigint | readonly []

const MAX_OPEN_PARENS = 200 // CPython's tokenizer limit, as in evaluateArithmetic
const STRING_PREFIXES = new Set(['', 'r', 'u', 'f', 'fr', 'rf', 'b', 'br', 'rb'])

/**
 * The string form of upstream's calculator: string literals (adjacent ones concatenated,
 * r/u/f/b prefixes), parentheses, `()`, and `.count(x)` calls with Python's str.count
 * semantics, chained and nested. Other Python this character set can spell (names, keywords,
 * other methods, numbers) throws PythonError, so the calculator answers nothing for it.
 * Returns the value as Python's `str()` prints it.
 */
export function evaluateStringCount(text: string): string {
  const parser = new StringCountParser(text)
  const value = parser.expression()
  if (parser.peek() !== '') throw new PythonError(`invalid syntax at '${parser.peek()}'`)
  if (typeof value === 'bigint') return value.toString()
  if (Array.isArray(value)) return '()'
  const { text: s, bytes } = value as PyString
  if (!bytes) return s
  return s.includes("'") && !s.includes('"') ? `b"${s}"` : `b'${s.replaceAll("'", "\\'")}'`
}

class StringCountParser {
  readonly #text: string
  #pos = 0
  #token = ''
  #openParens = 0

  constructor(text: string) {
    this.#text = text
    this.#advance()
  }

  peek(): string {
    return this.#token
  }

  /** expression := primary ('.' 'count' '(' expression ')')* */
  expression(): Value {
    let value = this.#primary()
    while (this.#token === '.') {
      this.#advance()
      const name = this.peek()
      if (name !== 'count') throw new PythonError(`unsupported attribute '${name}'`)
      this.#advance()
      if (this.peek() !== '(') throw new PythonError('only calls of .count are supported')
      const argument = this.#parenthesized(() => this.expression())
      value = count(value, argument)
    }
    if (this.#token === '(') throw new PythonError('object is not callable')
    return value
  }

  /** primary := string+ | '(' ')' | '(' expression ')' */
  #primary(): Value {
    if (this.#token === '(') return this.#parenthesized(() => this.expression(), [])
    if (!isStringToken(this.#token)) throw new PythonError(`unsupported syntax at '${this.#token}'`)
    const value = literal(this.#token)
    this.#advance()
    while (isStringToken(this.#token)) {
      const next = literal(this.#token)
      if (next.bytes !== value.bytes) throw new PythonError('cannot mix bytes and nonbytes literals')
      value.text += next.text
      this.#advance()
    }
    return value
  }

  /** '(' inner ')', or `empty` when the parentheses hold nothing (and `empty` is allowed). */
  #parenthesized(inner: () => Value, empty?: Value): Value {
    if (++this.#openParens > MAX_OPEN_PARENS) throw new PythonError('too many nested parentheses')
    this.#advance()
    let value: Value
    if (this.#token === ')') {
      if (empty === undefined) throw new PythonError('count() takes exactly one argument (0 given)')
      value = empty
    } else {
      value = inner()
    }
    if (this.#token !== ')') throw new PythonError("'(' was never closed")
    this.#openParens--
    this.#advance()
    return value
  }

  /** Python's tokenizer for these characters: strings (with prefixes), names, numbers, '.', '(' and ')'. */
  #advance(): void {
    const text = this.#text
    while (text[this.#pos] === ' ') this.#pos++
    const start = this.#pos
    const c = text[start]
    if (c === undefined) {
      this.#token = ''
      return
    }
    let end = start + 1
    if (/\w/.test(c)) {
      while (end < text.length && /\w/.test(text[end])) end++
      if (/^[a-z]*$/i.test(text.slice(start, end)) && (text[end] === "'" || text[end] === '"')) end = stringEnd(text, end)
    } else if (c === "'" || c === '"') {
      end = stringEnd(text, start)
    }
    this.#pos = end
    this.#token = text.slice(start, end)
  }
}

/** Where the string literal whose opening quote is at `quote` ends (exclusive). */
function stringEnd(text: string, quote: number): number {
  const q = text[quote]
  const delimiter = text.startsWith(q.repeat(3), quote) ? q.repeat(3) : q
  const close = text.indexOf(delimiter, quote + delimiter.length)
  if (close < 0) throw new PythonError('unterminated string literal')
  return close + delimiter.length
}

function isStringToken(token: string): boolean {
  return token.endsWith("'") || token.endsWith('"')
}

function literal(token: string): PyString {
  const open = token.search(/['"]/)
  const prefix = token.slice(0, open).toLowerCase()
  if (!STRING_PREFIXES.has(prefix)) throw new PythonError(`invalid string prefix '${prefix}'`)
  const quotes = token.startsWith(token[open].repeat(3), open) ? 3 : 1
  return { text: token.slice(open + quotes, token.length - quotes), bytes: prefix.includes('b') }
}

/** Python's str.count / bytes.count (non-overlapping; an empty needle counts len + 1) and tuple.count. */
function count(receiver: Value, needle: Value): bigint {
  if (Array.isArray(receiver)) return 0n
  if (typeof receiver === 'bigint') throw new PythonError("'int' object has no attribute 'count'")
  const { text, bytes } = receiver as PyString
  if (typeof needle === 'bigint' || Array.isArray(needle) || (needle as PyString).bytes !== bytes) {
    throw new PythonError('count() argument has the wrong type')
  }
  const sub = (needle as PyString).text
  if (sub === '') return BigInt(text.length + 1)
  let n = 0
  for (let at = text.indexOf(sub); at >= 0; at = text.indexOf(sub, at + sub.length)) n++
  return BigInt(n)
}
