import { KvEngineError } from './KvEngineError.js'

/**
 * The one .gguf among `files` whose name holds `quant` (case-insensitive) as a whole field, so
 * that Q4_K picks `x-Q4_K.gguf` but not `x-Q4_K_M.gguf`. Projector files (mmproj) are skipped: they
 * are not language models. Undefined when none matches; an error naming them when several do.
 */
export function pickQuantFile(files: string[], quant: string, where: string): string | undefined {
  const escaped = quant.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const field = new RegExp(`(^|[-._/])${escaped}([-.]|$)`, 'i')
  const matches = files.filter((f) => /\.gguf$/i.test(f) && !/mmproj/i.test(f) && field.test(f.replace(/\.gguf$/i, '.')))
  if (matches.length <= 1) return matches[0]
  throw new KvEngineError(
    'INVALID_ARGUMENT',
    `${where} has ${matches.length} .gguf files for ${quant} (${matches.join(', ')}); name one with hf:<owner>/<repo>/<file.gguf> (split GGUF files are not supported)`,
  )
}
