/**
 * The Hugging Face hub `hf:` models come from: `$KVENGINE_HF_ENDPOINT` (a mirror, or a test
 * server), else huggingface.co. Always ending in '/', so that paths resolve under a mirror's own
 * path (https://host/hf/) rather than replace it.
 */
export function hfEndpoint(): URL {
  const endpoint = process.env.KVENGINE_HF_ENDPOINT || 'https://huggingface.co'
  return new URL(endpoint.endsWith('/') ? endpoint : `${endpoint}/`)
}
