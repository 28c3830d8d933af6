/// <reference lib="dom" />
// The chat page in a real headless Chromium: type, send, watch the answer stream in.
// KVENGINE_SCREENSHOT=docs/chat-page.png also saves the page (the README's picture).
import { existsSync } from 'node:fs'

import test from 'ava'
import { chromium } from 'playwright-core'

import { Engine } from '../index.js'
import { chatPrompt, model, startServer } from './serverHarness.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

test('the chat page streams an answer typed into it, and keeps the conversation', async (t) => {
  // Failing, not skipping: a CI machine without a browser would otherwise pass this unseen.
  if (!existsSync(CHROMIUM)) return t.fail(`no Chromium at ${CHROMIUM}: run "apt-get install -y chromium" (.ci/run does) or set CHROMIUM_PATH`)
  const server = await startServer({ maxTokens: 40 })
  const browser = await chromium.launch({ executablePath: CHROMIUM })
  t.teardown(async () => {
    await browser.close()
    await server.close()
  })
  const page = await browser.newPage({ viewport: { width: 860, height: 620 } })
  await page.goto(server.url)
  await page.fill('#temperature', '0')
  await page.evaluate(() => {
    const w = window as unknown as { updates: number }
    w.updates = 0
    new MutationObserver(() => w.updates++).observe(document.getElementById('messages') as Node, { subtree: true, childList: true, characterData: true })
  })
  const question = 'Write a haiku about the sea.'
  await page.fill('#input', question)
  await page.press('#input', 'Enter')
  await page.waitForFunction(() => document.body.dataset.state === 'streaming' && (document.querySelector('.msg.assistant')?.textContent ?? '').length > 0)
  await page.waitForFunction(() => document.body.dataset.state === 'idle', undefined, { timeout: 120_000 })
  const answer = await page.textContent('.msg.assistant')
  const [reference] = await new Engine(model).generateBatch(chatPrompt(question), { temperature: 0, maxTokens: 40 })
  t.is(answer, reference.text, 'the page shows the greedy answer')
  const updates = await page.evaluate(() => (window as unknown as { updates: number }).updates)
  t.true(updates > 10, `the answer arrived in ${updates} updates, not at once`)
  t.regex((await page.textContent('#stats')) ?? '', /first token after \d+ ms/)

  await page.fill('#input', 'Give me three tips for better sleep.')
  await page.press('#input', 'Enter')
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant').length === 2 && document.body.dataset.state === 'idle', undefined, { timeout: 120_000 })
  t.true(((await page.locator('.msg.assistant').nth(1).textContent()) ?? '').length > 0)
  t.true(server.lines.some((l) => /POST \/v1\/chat\/completions 200 .* cached=[1-9]\d*/.test(l)), 'the second turn reused the first turn\'s K/V')
  if (process.env.KVENGINE_SCREENSHOT) await page.screenshot({ path: process.env.KVENGINE_SCREENSHOT })
})
