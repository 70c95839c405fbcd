// How text is made searchable (docs/search.md): the contract's match is a case-insensitive
// substring match of every term, with JavaScript's toLowerCase() as the case rule. The index
// keeps each text lower-cased here (the database's C locale would fold ASCII only) with its
// distinct one- and two-character pieces as keys; a term's own pieces find every text that
// holds it (and some that do not), and `strpos` on the lowered text confirms each candidate, so
// the results are exactly those of the substring match.

/** Terms never hold whitespace: a query is split on it, and no key spans it. */
const WHITESPACE = /\s/u;

/** The most keys one query asks the index for (the rarest-looking first); strpos confirms the rest. */
export const MAX_QUERY_KEYS = 12;

/** The text as the index stores and compares it. */
export function lowered(text: string): string {
  return text.toLowerCase();
}

/** The distinct one- and two-code-point pieces of lowered text, none holding whitespace. */
export function searchKeys(text: string): string[] {
  const keys = new Set<string>();
  let previous: string | undefined;
  for (const char of text) {
    if (WHITESPACE.test(char)) {
      previous = undefined;
      continue;
    }
    keys.add(char);
    if (previous !== undefined) keys.add(previous + char);
    previous = char;
  }
  return [...keys];
}

/** A query's terms, lower-cased, each once: what every hit must contain. */
export function queryTerms(q: string): string[] {
  return [
    ...new Set(
      lowered(q)
        .split(/\s+/u)
        .filter((term) => term.length > 0),
    ),
  ];
}

/** Code points, counted as the contract counts `q`'s length. */
export function codePointLength(text: string): number {
  let length = 0;
  for (const _ of text) length += 1;
  return length;
}

/**
 * The keys a candidate must have: each term's two-character pieces (its one character when it is
 * one character long). Pieces of letters that English text is full of say little, so when there
 * are more than MAX_QUERY_KEYS the ones with a rarer-looking character are asked for.
 */
export function queryKeys(terms: string[]): string[] {
  const keys = new Set<string>();
  for (const term of terms) {
    const chars = [...term];
    if (chars.length === 1) keys.add(chars[0]!);
    for (let i = 1; i < chars.length; i += 1) keys.add(chars[i - 1]! + chars[i]!);
  }
  return [...keys]
    .map((key, order) => ({ key, order, common: commonness(key) }))
    .sort((a, b) => a.common - b.common || a.order - b.order)
    .slice(0, MAX_QUERY_KEYS)
    .map(({ key }) => key);
}

// Letters ordered from the most to the least frequent in English text: a key made of frequent
// letters narrows the candidates least. Anything else (digits, punctuation, other scripts) counts
// as rare.
const FREQUENT = "etaoinshrdlcumwfgypbvkjxqz";

function commonness(key: string): number {
  let score = 0;
  for (const char of key) {
    const rank = FREQUENT.indexOf(char);
    score += rank === -1 ? 0 : FREQUENT.length - rank;
  }
  return score / [...key].length + ([...key].length === 1 ? FREQUENT.length : 0);
}
