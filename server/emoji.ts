// Reaction emoji: either one Unicode emoji (exactly one grapheme: skin tones, ZWJ sequences,
// keycaps, flags and tag-sequence subdivision flags included) or a short name such as
// `thumbsup` or `+1`. U+FE0F (VS16) is dropped so "❤️" and "❤" are the same reaction; nothing
// else is rewritten. Decisions beyond the contract:
// - A lone skin-tone modifier (🏽) is accepted: it has Emoji_Presentation and Unicode lists it
//   as a fully-qualified emoji component.
// - A modifier or tag sequence may follow any Extended_Pictographic character, not only
//   Emoji_Modifier_Base ones, so emoji newer than the runtime's Unicode data still pass.
// - Any pair of regional indicators is a flag (no check against a country list); a lone
//   regional indicator is not an emoji.
// - U+FE0E (text presentation) is not stripped, so an emoji carrying it is rejected.
// - The input must be one grapheme both as sent and with FE0F removed ("\uFE0F👍" fails).

const SHORT_NAME = /^[a-z0-9_+-]{1,64}$/;
/** Longest accepted emoji, in UTF-16 code units as sent (a family ZWJ sequence is 11). */
const MAX_EMOJI_LENGTH = 64;
const VS16 = /\uFE0F/g;

// One element of a ZWJ sequence: a pictographic character, optionally with a skin tone or a
// tag spec (E0020–E007E, then CANCEL TAG E007F) as in subdivision flags.
const ELEMENT = String.raw`\p{Extended_Pictographic}(?:\p{Emoji_Modifier}|[\u{E0020}-\u{E007E}]+\u{E007F})?`;
const FORMS = [
  String.raw`[0-9#*]\u20E3`, // keycap (its FE0F already removed)
  String.raw`\p{Regional_Indicator}{2}`, // flag
  String.raw`\p{Emoji_Modifier}`, // lone skin tone
  String.raw`${ELEMENT}(?:\u200D${ELEMENT})*`, // single emoji, modifier, tag or ZWJ sequence
];
const EMOJI = new RegExp(`^(?:${FORMS.join("|")})$`, "u");

const graphemes = new Intl.Segmenter(undefined, { granularity: "grapheme" });

function isOneGrapheme(text: string): boolean {
  let count = 0;
  for (const _ of graphemes.segment(text)) if (++count > 1) return false;
  return count === 1;
}

/** The stored form of a reaction emoji (short name as is, emoji without FE0F), or null if invalid. */
export function normalizeEmoji(input: string): string | null {
  if (SHORT_NAME.test(input)) return input;
  if (input.length > MAX_EMOJI_LENGTH || !isOneGrapheme(input)) return null;
  const stripped = input.replace(VS16, "");
  if (!isOneGrapheme(stripped) || !EMOJI.test(stripped)) return null;
  return stripped;
}
