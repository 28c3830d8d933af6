import { KvEngineError } from './KvEngineError.js'
import type { ModelSource } from './ModelSource.js'

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/
const HF_FORMS = 'hf:<owner>/<repo>/<file.gguf> or hf:<owner>/<repo>:<quant> (e.g. :Q4_K_M)'

/**
 * Reads `hf:<owner>/<repo>/<path/file.gguf>`, `hf:<owner>/<repo>:<quant>`, `hf:<owner>/<repo>`
 * (quant Q4_K_M, llama.cpp's default) and http(s) URLs, the forms node-llama-cpp and llama.cpp's
 * `-hf` take. Anything else is a local path: undefined.
 */
export function parseModelSource(spec: string): ModelSource | undefined {
  if (/^https?:\/\//i.test(spec)) return { kind: 'url', url: new URL(spec) }
  if (!spec.startsWith('hf:')) return undefined
  const [path, quant, extra] = spec.slice(3).split(':')
  const [owner, repo, ...file] = path.split('/')
  const bad = (why: string) => new KvEngineError('INVALID_ARGUMENT', `'${spec}' is not a Hugging Face model: ${why}; write ${HF_FORMS}`)
  if (extra !== undefined) throw bad('more than one ":"')
  if (!NAME.test(owner ?? '') || !NAME.test(repo ?? '')) throw bad('owner and repository must be plain names')
  if (file.length > 0) {
    if (quant !== undefined) throw bad('give a file or a quant, not both')
    // Segments are checked so that a name cannot climb out of the cache folder with '..'.
    if (!file.every((s) => NAME.test(s) && !s.includes('..'))) throw bad(`file path '${file.join('/')}' has an empty or unsafe segment`)
    return { kind: 'hf', owner, repo, file: file.join('/') }
  }
  if (quant !== undefined && !/^[A-Za-z0-9_.-]+$/.test(quant)) throw bad(`quant '${quant}' is not a name like Q4_K_M`)
  return { kind: 'hf', owner, repo, quant: quant || 'Q4_K_M' }
}
