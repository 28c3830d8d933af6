import type { NativeModelInfo } from './native.js'

/**
 * What a loaded model is: the binding's fields (documented in crate/src/node/model.rs), and
 * whether chats render with a Jinja template (the model's own, or `Model.load`'s `chatTemplate`).
 */
export interface ModelInfo extends NativeModelInfo {
  hasChatTemplate: boolean
}
