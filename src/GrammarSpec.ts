/**
 * What a generation's output must match, compiled by llguidance against the model's vocabulary:
 * one of a JSON Schema (an object, or its JSON text; written compactly unless the schema sets
 * llguidance's `x-guidance` options), a Lark grammar in llguidance's dialect, or a regular
 * expression the whole output matches.
 */
export type GrammarSpec = { jsonSchema: object | string } | { grammar: string } | { regex: string }

/** The keys a `GrammarSpec` has one of (the same names as `GenerateOptions`' grammar options). */
export const GRAMMAR_KINDS = ['jsonSchema', 'grammar', 'regex'] as const
