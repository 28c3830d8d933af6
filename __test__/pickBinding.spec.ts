// The loader's choice between the CPU and CUDA addons, over every combination that matters.
import test from 'ava'

import { pickBinding, type BindingFacts } from '../src/pickBinding.js'

const linux: BindingFacts = { requested: undefined, platform: 'linux', arch: 'x64', cudaAddons: ['/p/kvengine.linux-x64-gnu-cuda.node'], driver: true }

test('the CUDA addon is picked where it is installed and a driver is present', (t) => {
  t.deepEqual(pickBinding(linux), { kind: 'cuda', path: '/p/kvengine.linux-x64-gnu-cuda.node' })
  t.deepEqual(pickBinding({ ...linux, requested: 'cuda' }), { kind: 'cuda', path: '/p/kvengine.linux-x64-gnu-cuda.node' })
  t.deepEqual(pickBinding({ ...linux, cudaAddons: ['/a', '/b'] }), { kind: 'cuda', path: '/a' })
})

test('the CPU addon otherwise, unless CUDA was demanded', (t) => {
  t.deepEqual(pickBinding({ ...linux, requested: 'cpu' }), { kind: 'cpu' })
  t.deepEqual(pickBinding({ ...linux, requested: ' CPU ' }), { kind: 'cpu' })
  t.deepEqual(pickBinding({ ...linux, driver: false }), { kind: 'cpu' })
  t.deepEqual(pickBinding({ ...linux, cudaAddons: [] }), { kind: 'cpu' })
  t.deepEqual(pickBinding({ ...linux, platform: 'darwin', arch: 'arm64' }), { kind: 'cpu' })
  t.deepEqual(pickBinding({ ...linux, requested: '' }), { kind: 'cuda', path: '/p/kvengine.linux-x64-gnu-cuda.node' })
})

test('demanding CUDA where it cannot run says why', (t) => {
  const why = (f: Partial<BindingFacts>) => {
    const c = pickBinding({ ...linux, requested: 'cuda', ...f })
    return c.kind === 'error' ? c.message : `picked ${c.kind}`
  }
  t.regex(why({ driver: false }), /no NVIDIA driver/)
  t.regex(why({ cudaAddons: [] }), /npm run build:cuda/)
  t.regex(why({ platform: 'win32' }), /linux-x64 only/)
  t.regex(why({ requested: 'tpu' }), /must be 'cpu' or 'cuda'/)
})
