// llama.cpp's KV-cache bytes for a context sized for the headline decode run: cells × layers ×
// (K and V) × KV heads × head dim × element size. node-llama-cpp does not expose the cache's
// byte size itself (its stateSize is the size of a saved state), so this is the formula, on
// the cell count and cache type the context actually got.
import { GgmlType, type LlamaModel } from 'node-llama-cpp'

import { metadataValue, readGgufHeader } from '../lib/ggufRead.js'

const ELEMENT_BYTES: Partial<Record<GgmlType, number>> = { [GgmlType.F16]: 2, [GgmlType.F32]: 4 }

export async function llamaKvBytes(model: LlamaModel, path: string, positions: number): Promise<{ bytes: number; note: string }> {
  const header = readGgufHeader(path)
  const arch = String(metadataValue(header, 'general.architecture'))
  const num = (key: string) => Number(metadataValue(header, `${arch}.${key}`))
  const headDim = num('embedding_length') / num('attention.head_count')
  const context = await model.createContext({ contextSize: positions, sequences: 1 })
  const cells = context.contextSize
  const kType = context.kvCacheKeyType
  const vType = context.kvCacheValueType
  await context.dispose()
  const k = ELEMENT_BYTES[kType]
  const v = ELEMENT_BYTES[vType]
  if (k === undefined || v === undefined) return { bytes: NaN, note: `KV types ${GgmlType[kType]}/${GgmlType[vType]} not sized here` }
  const bytes = cells * num('block_count') * num('attention.head_count_kv') * headDim * (k + v)
  return { bytes, note: `formula: ${cells} cells (a context asked for ${positions} positions) × layers × KV heads × head dim × (K ${GgmlType[kType]} + V ${GgmlType[vType]})` }
}
