// normalizeEmoji: one-grapheme Unicode emoji (FE0F removed) or a short name, anything else null.
import { describe, expect, it } from "vitest";
import { normalizeEmoji } from "../server/emoji.ts";

describe("normalizeEmoji", () => {
  it.each([
    ["simple emoji", "👍", "👍"],
    ["text-default emoji without FE0F", "❤", "❤"],
    ["text-default emoji with FE0F", "❤\uFE0F", "❤"],
    ["copyright sign with FE0F", "©\uFE0F", "©"],
    ["skin tone", "👍🏽", "👍🏽"],
    ["lone skin-tone modifier", "🏽", "🏽"],
    ["ZWJ family", "👨‍👩‍👧", "👨‍👩‍👧"],
    ["ZWJ family of four", "👨‍👩‍👧‍👦", "👨‍👩‍👧‍👦"],
    ["ZWJ with skin tone", "🧑🏽‍💻", "🧑🏽‍💻"],
    ["ZWJ with two skin tones", "🫱🏻‍🫲🏼", "🫱🏻‍🫲🏼"],
    ["ZWJ with FE0F inside", "🏳\uFE0F‍🌈", "🏳‍🌈"],
    ["ZWJ with FE0F inside, already stripped", "🏳‍🌈", "🏳‍🌈"],
    ["flag", "🇯🇵", "🇯🇵"],
    ["subdivision flag", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"],
    ["keycap digit", "1\uFE0F\u20E3", "1\u20E3"],
    ["keycap #", "#\uFE0F\u20E3", "#\u20E3"],
    ["keycap * without FE0F", "*\u20E3", "*\u20E3"],
    ["ZWJ sequence of 62 code units", "👨" + "\u200D👨".repeat(20), "👨" + "\u200D👨".repeat(20)],
  ])("accepts %s", (_name, input, expected) => {
    expect(normalizeEmoji(input)).toBe(expected);
  });

  it.each([
    ["a word", "thumbsup"],
    ["+1", "+1"],
    ["-1", "-1"],
    ["digits alone", "1"],
    ["all allowed characters", "a-z_0+9"],
    ["64 characters", "a".repeat(64)],
  ])("accepts the short name %s unchanged", (_name, input) => {
    expect(normalizeEmoji(input)).toBe(input);
  });

  it.each([
    ["empty", ""],
    ["space", " "],
    ["whitespace around an emoji", " 👍"],
    ["whitespace around a short name", "thumbsup\n"],
    ["tab", "\t"],
    ["65-character short name", "a".repeat(65)],
    ["uppercase", "ThumbsUp"],
    ["short name with a space", "thumbs up"],
    ["short name with other punctuation", "thumbs.up"],
    ["non-ASCII letters", "café"],
    ["two emoji", "👍👍"],
    ["two emoji with FE0F", "❤\uFE0F❤\uFE0F"],
    ["emoji plus text", "👍a"],
    ["text plus emoji", "a👍"],
    ["letter with FE0F", "a\uFE0F"],
    ["digit with FE0F but no keycap", "1\uFE0F"],
    ["# alone", "#"],
    ["# with FE0F but no keycap", "#\uFE0F"],
    ["keycap on a letter", "a\u20E3"],
    ["FE0F alone", "\uFE0F"],
    ["leading FE0F", "\uFE0F👍"],
    ["lone regional indicator", "🇯"],
    ["regional indicators split by FE0F", "🇯\uFE0F🇵"],
    ["three regional indicators", "🇯🇵🇫"],
    ["trailing ZWJ", "👍\u200D"],
    ["text presentation selector", "❤\uFE0E"],
    ["combining mark on a letter", "e\u0301"],
    ["lone surrogate", "\uD83D"],
    ["emoji longer than 64 code units", "👨" + "\u200D👨".repeat(21)],
  ])("rejects %s", (_name, input) => {
    expect(normalizeEmoji(input)).toBeNull();
  });

  it("returns the FE0F-free form, which is itself valid and unchanged", () => {
    for (const input of ["❤\uFE0F", "#\uFE0F\u20E3", "🏳\uFE0F‍🌈", "👁\uFE0F‍🗨\uFE0F"]) {
      const normalized = normalizeEmoji(input);
      expect(normalized).not.toBeNull();
      expect(normalized).not.toContain("\uFE0F");
      expect(normalizeEmoji(normalized!)).toBe(normalized);
    }
  });
});
