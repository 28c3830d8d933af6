// Which native addon to load: the CUDA build for linux-x64 where it is installed and an NVIDIA
// driver is present, the CPU build otherwise. Pure, so the choice is testable without either.

export interface BindingFacts {
  /** KVENGINE_DEVICE: 'cpu' forces the CPU build, 'cuda' demands the CUDA one, unset picks. */
  requested: string | undefined
  platform: string
  arch: string
  /** Paths of installed CUDA addons, in order of preference. */
  cudaAddons: string[]
  /** Whether an NVIDIA driver is loaded (/proc/driver/nvidia/version exists). */
  driver: boolean
}

export type BindingChoice = { kind: 'cpu' } | { kind: 'cuda'; path: string } | { kind: 'error'; message: string }

export const CUDA_PACKAGE = 'kvengine-linux-x64-gnu-cuda'
export const CUDA_ADDON = 'kvengine.linux-x64-gnu-cuda.node'

export function pickBinding(f: BindingFacts): BindingChoice {
  const requested = f.requested?.trim().toLowerCase() || undefined
  if (requested !== undefined && requested !== 'cpu' && requested !== 'cuda') {
    return { kind: 'error', message: `KVENGINE_DEVICE must be 'cpu' or 'cuda', got '${f.requested}'` }
  }
  if (requested === 'cpu') return { kind: 'cpu' }
  const supported = f.platform === 'linux' && f.arch === 'x64'
  const addon = supported ? f.cudaAddons[0] : undefined
  if (addon !== undefined && f.driver) return { kind: 'cuda', path: addon }
  if (requested !== 'cuda') return { kind: 'cpu' }
  if (!supported) return { kind: 'error', message: `the CUDA build exists for linux-x64 only, not ${f.platform}-${f.arch}` }
  if (addon === undefined) {
    return { kind: 'error', message: `KVENGINE_DEVICE=cuda but the CUDA build is not installed: install ${CUDA_PACKAGE} or run "npm run build:cuda"` }
  }
  return { kind: 'error', message: 'KVENGINE_DEVICE=cuda but no NVIDIA driver is loaded (/proc/driver/nvidia/version is missing)' }
}
