import type { DownloadProgress } from './DownloadProgress.js'
import { formatBytes } from './formatBytes.js'

const BAR_WIDTH = 24

/**
 * A progress reporter for downloads on stderr. On a terminal it redraws one line with a bar, at
 * most ten times a second; into a pipe or log file it writes a line per tenth of the file (or per
 * 10 seconds when the size is unknown), so logs stay short and still show the transfer moving.
 */
export function stderrProgress(stream: NodeJS.WriteStream = process.stderr): (p: DownloadProgress) => void {
  let lastDraw = 0
  let lastStep = -1
  return (p) => {
    const now = performance.now()
    if (stream.isTTY) {
      if (!p.done && now - lastDraw < 100) return
      lastDraw = now
      stream.write(`\r${bar(p)} ${describe(p)}\x1b[K${p.done ? '\n' : ''}`)
      return
    }
    const step = p.total ? Math.floor((p.received / p.total) * 10) : Math.floor(now / 10_000)
    if (step === lastStep && !p.done) return
    lastStep = step
    stream.write(`${describe(p)}\n`)
  }
}

function describe(p: DownloadProgress): string {
  const pct = p.total ? ` (${Math.floor((p.received / p.total) * 100)}%)` : ''
  const of = p.total ? ` / ${formatBytes(p.total)}` : ''
  const resumed = p.resumedFrom > 0 ? `, resumed at ${formatBytes(p.resumedFrom)}` : ''
  const verb = !p.done ? 'downloading' : p.total === undefined || p.received === p.total ? 'downloaded' : 'stopped'
  return `${verb} ${p.file}: ${formatBytes(p.received)}${of}${pct} at ${formatBytes(p.bytesPerSecond)}/s${resumed}`
}

function bar(p: DownloadProgress): string {
  const filled = p.total ? Math.round((p.received / p.total) * BAR_WIDTH) : 0
  return `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}]`
}
