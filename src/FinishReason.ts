/** `stop`: an end-of-turn token or stop string; `length`: maxTokens or the context ran out. */
export type FinishReason = 'stop' | 'length'
