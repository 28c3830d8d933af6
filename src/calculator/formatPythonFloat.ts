/**
 * Python's `str(float)` (= `repr`): the shortest digits that round-trip, which JavaScript's
 * number formatting also produces, laid out Python's way: exponent form when the decimal point
 * falls more than 4 places left of or 16 places right of the digits (`1e-05`, `1e+16`), a sign
 * and at least two digits in the exponent, and `.0` on integral values.
 */
export function formatPythonFloat(x: number): string {
  if (Number.isNaN(x)) return 'nan'
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf'
  const sign = x < 0 || Object.is(x, -0) ? '-' : ''
  // toExponential() without an argument gives the shortest round-trip digits: "d.ddde±n".
  const [mantissa, exponent] = Math.abs(x).toExponential().split('e')
  const digits = mantissa.replace('.', '')
  // Python's decpt: the value is 0.<digits> × 10^decpt.
  const decpt = Number(exponent) + 1
  if (decpt <= -4 || decpt > 16) {
    const e = decpt - 1
    const rest = digits.length > 1 ? `.${digits.slice(1)}` : ''
    return `${sign}${digits[0]}${rest}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`
  }
  if (decpt <= 0) return `${sign}0.${'0'.repeat(-decpt)}${digits}`
  if (decpt >= digits.length) return `${sign}${digits}${'0'.repeat(decpt - digits.length)}.0`
  return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`
}
