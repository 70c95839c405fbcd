// What of a message is sent for translation: its prose only. Code (fenced blocks and inline
// spans), URLs, e-mail addresses, @mentions, #channels and <…> tokens are kept verbatim and never
// sent, so a provider cannot mangle them; the prose between them is sent as separate texts (in
// one request) and the message is put back together around the kept parts. Whitespace at the
// edges of each piece is kept too, so line breaks and spacing survive.

/** The pieces, in order: kept verbatim, or prose to translate (without its edge whitespace). */
export type Piece = { keep: string } | { prose: string; before: string; after: string };

const PROTECTED = new RegExp(
  [
    "```[\\s\\S]*?(?:```|$)", // a fenced code block (to the end when unclosed)
    "`[^`\\n]+`", // inline code
    "\\b[a-z][a-z0-9+.-]*://[^\\s<>]+", // a URL with a scheme
    "\\bwww\\.[^\\s<>]+", // a bare www. URL
    "[\\w.+-]+@[\\w-]+(?:\\.[\\w-]+)+", // an e-mail address
    "(?<![\\w@])[@#][\\w][\\w.-]*", // @mention, #channel
    "<[^<>\\s][^<>]*>", // <@U123>, <!here>, <https://…|label> and the like
  ].join("|"),
  "giu",
);

/** Text with at least one letter is worth translating; digits, punctuation and emoji alone are not. */
const HAS_LETTER = /\p{L}/u;

export function splitForTranslation(content: string): Piece[] {
  const pieces: Piece[] = [];
  let at = 0;
  const addProse = (text: string) => {
    if (text === "") return;
    if (!HAS_LETTER.test(text)) return pieces.push({ keep: text });
    const before = /^\s*/u.exec(text)![0];
    const after = /\s*$/u.exec(text.slice(before.length))![0];
    pieces.push({ prose: text.slice(before.length, text.length - after.length), before, after });
  };
  for (const match of content.matchAll(PROTECTED)) {
    addProse(content.slice(at, match.index));
    pieces.push({ keep: match[0] });
    at = match.index + match[0].length;
  }
  addProse(content.slice(at));
  return pieces;
}

/** The distinct prose texts of the pieces: what the provider is asked for. */
export function proseOf(pieces: Piece[]): string[] {
  return [...new Set(pieces.flatMap((piece) => ("prose" in piece ? [piece.prose] : [])))];
}

/** Whether the message has anything to translate at all. */
export function hasProse(content: string): boolean {
  return splitForTranslation(content).some((piece) => "prose" in piece);
}

/** The message again, each prose piece replaced by its translation. */
export function reassemble(pieces: Piece[], translated: ReadonlyMap<string, string>): string {
  return pieces
    .map((piece) =>
      "keep" in piece ? piece.keep : piece.before + (translated.get(piece.prose) ?? piece.prose) + piece.after,
    )
    .join("");
}
