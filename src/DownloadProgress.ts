/** How far a download has come; handed to `onProgress` as bytes arrive. */
export interface DownloadProgress {
  /** The file's name, for display. */
  file: string
  /** Bytes of the file on disk so far, resumed ones included. */
  received: number
  /** The file's full size, when the server said it. */
  total: number | undefined
  /** Bytes a previous, interrupted run had already saved (0 when starting fresh). */
  resumedFrom: number
  /** Transfer rate of this run, bytes per second. */
  bytesPerSecond: number
  /** True once, on the last call: the download ended, complete (`received === total`) or broken off. */
  done: boolean
}
