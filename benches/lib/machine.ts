// What the benchmark ran on, recorded with its figures.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { cpus, release, totalmem } from 'node:os'
import { join } from 'node:path'

import { ROOT } from './paths.js'

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}

export function machineInfo() {
  const llamaPkg = JSON.parse(readFileSync(join(ROOT, 'node_modules', 'node-llama-cpp', 'package.json'), 'utf8')) as { version: string }
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: +(totalmem() / 2 ** 30).toFixed(1),
    kernel: release(),
    node: process.version,
    nodeLlamaCpp: llamaPkg.version,
    kvengineCommit: git(['rev-parse', '--short', 'HEAD']),
    // Uncommitted kernel work changes the figures, so say so.
    workingTreeDirty: git(['status', '--porcelain', '--', 'crate', 'src']) !== '',
  }
}
