/**
 * Where a model comes from, as `-m` and `downloadModel()` accept it: a file in a Hugging Face
 * repository (named, or picked by its quantization), or a URL.
 */
export type ModelSource =
  | { kind: 'hf'; owner: string; repo: string; file: string; quant?: undefined }
  | { kind: 'hf'; owner: string; repo: string; file?: undefined; quant: string }
  | { kind: 'url'; url: URL }
