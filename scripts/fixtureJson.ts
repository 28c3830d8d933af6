// Writes a golden fixture as JSON with one line per item of each top-level list: diffable in
// review, yet compact (long id arrays stay on one line). Shared by the fixture generators.
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'

export function writeFixtureJson(path: string, value: object, log: (msg: string) => void): void {
  mkdirSync(dirname(path), { recursive: true })
  const body = Object.entries(value).map(([k, v]) => Array.isArray(v)
    ? `  ${JSON.stringify(k)}: [\n${v.map((x) => `    ${JSON.stringify(x)}`).join(',\n')}\n  ]`
    : `  ${JSON.stringify(k)}: ${JSON.stringify(v)}`)
  const json = `{\n${body.join(',\n')}\n}\n`
  JSON.parse(json)
  writeFileSync(path, json)
  log(`wrote ${path} (${Buffer.byteLength(json)} bytes)`)
}
