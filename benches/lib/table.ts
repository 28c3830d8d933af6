// Plain-text tables with aligned columns, for the terminal and for pasting into Markdown.

/** The first `leftColumns` columns are text (left-aligned); the rest are figures (right-aligned). */
export function table(header: string[], rows: string[][], leftColumns = 1): string {
  const all = [header, ...rows]
  const widths = header.map((_, c) => Math.max(...all.map((r) => (r[c] ?? '').length)))
  const line = (r: string[]) => `| ${r.map((cell, c) => (c < leftColumns ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join(' | ')} |`
  return [line(header), `|${widths.map((w, c) => (c < leftColumns ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...rows.map(line)].join('\n')
}

export const fixed = (x: number | undefined, digits = 1) => (x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(digits))
export const mib = (bytes: number | undefined) => (bytes === undefined || !Number.isFinite(bytes) ? '–' : (bytes / 2 ** 20).toFixed(1))
export const pct = (share: number | undefined) => (share === undefined || !Number.isFinite(share) ? '–' : `${(share * 100).toFixed(1)}%`)
