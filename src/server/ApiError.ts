import { KvEngineError, type KvEngineErrorCode } from '../KvEngineError.js'

/** HTTP status and OpenAI error type for each KvEngineError code: the only place they are mapped. */
const BY_CODE: Record<KvEngineErrorCode, { status: number; type: string; code: string | null }> = {
  INVALID_ARGUMENT: { status: 400, type: 'invalid_request_error', code: 'invalid_value' },
  CONTEXT_OVERFLOW: { status: 400, type: 'invalid_request_error', code: 'context_length_exceeded' },
  UNSUPPORTED: { status: 400, type: 'invalid_request_error', code: 'unsupported' },
  NOT_FOUND: { status: 404, type: 'invalid_request_error', code: 'not_found' },
  // The client went away: nobody reads this, but logs and metrics see 499 as nginx writes it.
  ABORTED: { status: 499, type: 'invalid_request_error', code: 'client_closed_request' },
  DISPOSED: { status: 503, type: 'server_error', code: 'model_unloaded' },
  BUSY: { status: 409, type: 'invalid_request_error', code: 'busy' },
  CORRUPT_FILE: { status: 500, type: 'server_error', code: null },
  INTERNAL: { status: 500, type: 'server_error', code: null },
  // Download errors come before a server exists; mapped only because every code must be.
  NOT_WRITABLE: { status: 500, type: 'server_error', code: null },
  DOWNLOAD_FAILED: { status: 502, type: 'server_error', code: null },
  CHECKSUM_MISMATCH: { status: 502, type: 'server_error', code: null },
}

/** An error as the server answers it: a status and OpenAI's `{ error: { message, type, param, code } }`. */
export class ApiError extends Error {
  readonly status: number
  readonly type: string
  readonly code: string | null
  readonly param: string | null

  constructor(status: number, message: string, options: { type?: string; code?: string | null; param?: string | null } = {}) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.type = options.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error')
    this.code = options.code ?? null
    this.param = options.param ?? null
  }

  /** A request field that is missing, of the wrong type or out of range. */
  static invalid(param: string, message: string): ApiError {
    return new ApiError(400, message, { code: 'invalid_value', param })
  }

  static from(err: unknown): ApiError {
    if (err instanceof ApiError) return err
    if (err instanceof KvEngineError) {
      const { status, type, code } = BY_CODE[err.code]
      return new ApiError(status, err.message, { type, code })
    }
    return new ApiError(500, `internal error: ${(err as Error)?.message ?? String(err)}`)
  }

  get body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } }
  }
}
