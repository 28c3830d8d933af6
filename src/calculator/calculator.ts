import { evaluateArithmetic } from './evaluateArithmetic.js'
import { evaluateStringCount } from './evaluateStringCount.js'
import { formatPythonFloat } from './formatPythonFloat.js'
import { PythonError } from './PythonError.js'

const ARITHMETIC = /^[0-9*+\-/.() ]*$/
const STRING_FORM = /^[A-Za-z0-9'"()._ ]*$/
const FORBIDDEN = ['__', 'import', 'exec', 'eval', 'compile', 'open', 'file', 'input', 'raw_input', 'globals', 'locals', 'vars', 'dir', 'getattr', 'setattr', 'delattr', 'hasattr']
// Python prints no int longer than this (str() raises ValueError, which upstream does not catch).
const MAX_RESULT_DIGITS = 4300
// Upstream's bound was a 3 s alarm; ours is on size. Every step below is linear in the text or a
// bigint operation on numbers no longer than it, so this keeps any input to a few milliseconds.
const MAX_EXPRESSION_LENGTH = 20_000

/**
 * nanochat's `use_calculator` without `eval`: the expression's result as Python's `str()` prints
 * it, or null where upstream returns None (refused, or Python raises). Arithmetic over
 * `0123456789*+-/.() ` (commas deleted, `**` refused) follows CPython exactly: bignum ints, float
 * `/`, floor `//`. Otherwise only the `'…'.count('…')` string form is evaluated, after upstream's
 * character and forbidden-substring checks.
 */
export function calculator(expression: string): string | null {
  // Before the commas go: deleting 10^8 of them took seconds, only for the result to be refused.
  if (expression.length > MAX_EXPRESSION_LENGTH) return null
  const text = expression.replaceAll(',', '')
  try {
    if (ARITHMETIC.test(text)) {
      if (text.includes('**')) return null
      const value = evaluateArithmetic(text)
      if (typeof value === 'number') return formatPythonFloat(value)
      if (typeof value !== 'bigint') return '()'
      const digits = value.toString()
      return digits.replace('-', '').length > MAX_RESULT_DIGITS ? null : digits
    }
    if (!STRING_FORM.test(text)) return null
    const lower = text.toLowerCase()
    if (FORBIDDEN.some((word) => lower.includes(word)) || !text.includes('.count(')) return null
    return evaluateStringCount(text)
  } catch (err) {
    if (err instanceof PythonError) return null
    throw err
  }
}
