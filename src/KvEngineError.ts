/** What went wrong, in a form a program can branch on. */
export type KvEngineErrorCode =
  | 'INVALID_ARGUMENT' // a caller passed a value outside what the API accepts
  | 'NOT_FOUND' // a path that does not exist
  | 'CORRUPT_FILE' // a model or tokenizer file that cannot be parsed
  | 'UNSUPPORTED' // a well-formed file we do not (yet) run: architecture, tensor type, CPU
  | 'CONTEXT_OVERFLOW' // a sequence longer than the model's context window
  | 'DISPOSED' // the object was disposed
  | 'ABORTED' // the caller's AbortSignal fired
  | 'BUSY' // the cache is in use by another generation; retry once that one ends
  | 'NOT_WRITABLE' // a folder kvengine must write to (the model cache) cannot be written
  | 'DOWNLOAD_FAILED' // a model download failed (network, HTTP status); rerunning resumes it
  | 'CHECKSUM_MISMATCH' // a downloaded file is not the one its source published; it was removed
  | 'INTERNAL' // a bug in kvengine; the message says what to report

/** Every error kvengine throws on purpose is one of these. */
export class KvEngineError extends Error {
  readonly code: KvEngineErrorCode

  constructor(code: KvEngineErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'KvEngineError'
    this.code = code
  }
}
