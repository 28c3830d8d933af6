// The binding's own interface, documented in crate/src/node/model.rs, published under our name.
export type { NativeModelInfo as ModelInfo } from './native.js'
