import { chmod, mkdir } from 'node:fs/promises'
import { dirname, join, relative, resolve } from 'node:path'

import { writeMember } from './extractZipEntry.js'
import { KvEngineError } from './KvEngineError.js'
import { zipDirectory } from './zipDirectory.js'

/** Unpacks every member of a zip archive under `destDir`, keeping executable bits (a build tool's
 * wheel: zig for scripts/build-native.mjs). A member naming a path outside `destDir` is refused. */
export async function extractZip(zip: string, destDir: string): Promise<void> {
  const root = resolve(destDir)
  for (const member of await zipDirectory(zip)) {
    const path = resolve(join(root, member.name))
    if (relative(root, path).startsWith('..')) throw new KvEngineError('CORRUPT_FILE', `${zip}: member ${member.name} points outside ${root}`)
    if (member.name.endsWith('/')) continue
    await mkdir(dirname(path), { recursive: true })
    await writeMember(zip, member, path)
    if (member.mode & 0o111) await chmod(path, member.mode)
  }
}
