import { homedir } from 'node:os'
import { join } from 'node:path'

/**
 * The per-user folder downloaded models are cached in: `$KVENGINE_MODELS_DIR`, else
 * `$XDG_CACHE_HOME/kvengine`, else `~/.cache/kvengine`. Per user rather than inside the package,
 * because an installed package's folder is often read-only and is wiped by every reinstall.
 */
export function modelsDir(): string {
  const { KVENGINE_MODELS_DIR: own, XDG_CACHE_HOME: xdg } = process.env
  if (own) return own
  return join(xdg || join(homedir(), '.cache'), 'kvengine')
}
