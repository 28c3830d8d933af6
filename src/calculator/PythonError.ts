/**
 * Where CPython would raise (SyntaxError, ZeroDivisionError, OverflowError, TypeError, or a
 * limit of its compiler). The calculator turns it into "no result", as upstream's `except
 * Exception` does; the message is only for debugging.
 */
export class PythonError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'PythonError'
  }
}
