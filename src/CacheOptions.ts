/** How `model.createCache()` stores keys and values. */
export interface CacheOptions {
  /**
   * Element type of K and V: 'f16' (the default, as llama.cpp's cache) halves the memory and
   * the bytes attention reads for a rounding of each element to 11 significant bits; 'f32'
   * keeps them exact, for logits that must match an f32 reference closely. CPU models only: a
   * CUDA model's cache keeps its compute dtype.
   */
  kvType?: 'f16' | 'f32'
}
