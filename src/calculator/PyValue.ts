/**
 * A value of the calculator's arithmetic: a Python int (bigint, unbounded like Python's), a
 * Python float (number), or the empty tuple `()` (an empty array), the only other value the
 * allowed characters can spell.
 */
export type PyValue = bigint | number | readonly []
