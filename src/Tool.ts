/**
 * A tool the model can call: the decoded text between the call delimiters in, the text to inject
 * back (between the output delimiters), or null to inject nothing. It runs on the JS thread
 * between two decode steps, so it must be synchronous and quick; an exception it throws ends the
 * generation with that error.
 */
export type Tool = (expression: string) => string | null
