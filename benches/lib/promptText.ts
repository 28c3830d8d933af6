// The benchmark's prompt text: ordinary English prose, long enough for the longest prompt.
// Numbered paragraphs so the text is not one phrase repeated (which some tokenizers compress).
const SENTENCES = [
  'The library opened early on weekdays, and the reading room filled with students before nine.',
  'A river crossed the valley from north to south, turning two mills on its way to the sea.',
  'She wrote the results in a notebook, checked each figure twice, and only then told the others.',
  'Trains left the station every twenty minutes, except on holidays, when they ran once an hour.',
  'The recipe called for flour, butter, a pinch of salt and enough cold water to bind the dough.',
  'Engineers measured the bridge after the storm and found that it had moved by less than a millimetre.',
  'In the spring the orchard was white with blossom, and by autumn the branches bent under the apples.',
  'He kept his tools in a wooden box, each one cleaned and oiled before it was put away for the night.',
]

export function promptText(paragraphs: number): string {
  const out: string[] = []
  for (let p = 0; p < paragraphs; p++) {
    const body = Array.from({ length: 4 }, (_, i) => SENTENCES[(p * 3 + i) % SENTENCES.length]).join(' ')
    out.push(`Paragraph ${p + 1}. ${body}`)
  }
  return out.join('\n\n')
}
