// JSON schemas of different shapes for the constrained-decoding suites (grammar.spec.ts and
// server-structured.spec.ts); strings are bounded so a random-weight model's output ends.
export const SCHEMAS: Record<string, object> = {
  nested: {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 12 },
      address: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 10 }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
        required: ['city', 'zip'],
        additionalProperties: false,
      },
    },
    required: ['name', 'address'],
    additionalProperties: false,
  },
  enumAndRange: {
    type: 'object',
    properties: { color: { enum: ['red', 'green', 'blue'] }, count: { type: 'integer', minimum: 1, maximum: 20 } },
    required: ['color', 'count'],
    additionalProperties: false,
  },
  arrayBounds: {
    type: 'object',
    properties: { tags: { type: 'array', items: { type: 'string', maxLength: 8 }, minItems: 2, maxItems: 4 } },
    required: ['tags'],
    additionalProperties: false,
  },
  patterns: {
    type: 'object',
    properties: { date: { type: 'string', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' }, ok: { type: 'boolean' } },
    required: ['date', 'ok'],
    additionalProperties: false,
  },
}

