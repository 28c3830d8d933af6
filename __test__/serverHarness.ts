// Starts the server in-process on a free port, and reads its /metrics, for the server suites.
import { Model } from '../index.js'
import { serve, type ServeOptions } from '../src/server/serve.js'
import { modelPath } from './models.js'

export const model = await Model.load(modelPath('Q8_0'))

export async function startServer(options: ServeOptions = {}) {
  const lines: string[] = []
  const server = await serve(model, { port: 0, maxRows: 8, log: (line) => lines.push(line), ...options })
  return { url: server.url, close: () => server.close(), lines }
}

/** The unlabelled metrics of one /metrics scrape, by name. */
export async function scrape(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}metrics`)).text()
  return new Map([...text.matchAll(/^(\w+) (\S+)$/gm)].map((m) => [m[1], Number(m[2])]))
}

export async function metric(url: string, name: string): Promise<number> {
  const value = (await scrape(url)).get(name)
  if (value === undefined) throw new Error(`metric ${name} missing from /metrics`)
  return value
}

export function post(url: string, path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal })
}

export const chatPrompt = (content: string) =>
  model.tokenizer.encode(model.applyChatTemplate([{ role: 'user', content }], { addGenerationPrompt: true }), { special: true })
