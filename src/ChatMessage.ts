export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool'
  content: string
}
