"""BRIGHT's BM25 analyzer in Python: the tokens pyserini's default Lucene analyzer produces (BRIGHT, Su et
al., ICLR 2025, arXiv 2407.12883; its retrievers.py).

BRIGHT (retrievers.py) tokenizes with ``pyserini.analysis.Analyzer(get_lucene_analyzer())``: Anserini's
DefaultEnglishAnalyzer, i.e. Lucene's StandardTokenizer, EnglishPossessiveFilter, LowerCaseFilter, StopFilter
(Lucene's 33 English stop words) and PorterStemFilter. Each step here:

- ``standard_tokens``: UAX#29 word boundaries as Lucene's StandardTokenizer grammar applies them, with the
  ``regex`` module's Unicode properties. Only Lucene's token kinds come out: words and numbers (letters, digits,
  underscores, and the mid-word ``' . , :`` of "don't", "3.14", "1,000", "e.g"), runs of Thai/Lao/Myanmar/Khmer
  letters, one token per Han ideograph or Hiragana character, Katakana and Hangul runs, emoji sequences.
  Punctuation and symbols are dropped. Tokens longer than 255 UTF-16 units are cut the way Lucene's scanner
  cuts them (the longest token within 255 units, then scanning resumes).
- possessive: a trailing 's (straight, curly or full-width apostrophe) is removed, before lower-casing.
- lower-casing character by character, as Java's Character.toLowerCase does (no final sigma, İ -> i).
- stop words, then ``porter.porter_stem`` (Lucene's Porter, which differs from Snowball's).

Checked token for token against Lucene 9.9.1 (Anserini 0.24, the jar inside the pyserini 0.24.0 wheel) on the
table of tricky strings in tests/fixtures/lucene_english_tokens.json and on every document and query of SciFact,
Cranfield and the stdlib-docs demo corpus. Known gap: the ``regex`` module's Unicode version is newer than
Lucene's, so characters assigned after Unicode 13 may be classed differently.
"""

from __future__ import annotations

import regex

from garen_infer.index.lexical.lucene_unicode import LUCENE_EMOJI, UNKNOWN_TO_LUCENE
from garen_infer.index.lexical.porter import porter_stem

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (what pyserini's analyzer, and so BRIGHT's BM25, removes)
LUCENE_STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
))
MAX_TOKEN_UNITS = 255  # StandardTokenizer's default maxTokenLength, in UTF-16 units

NOTHING = r"[^\x00-\U0010FFFF]"  # an empty class

# ---- the token grammar (UAX#29 rules WB4-WB13b, the subset Lucene's grammar turns into tokens) ----------------
def token_patterns(unknown: str = UNKNOWN_TO_LUCENE, emoji: str = LUCENE_EMOJI, ascii_only: bool = False):
    """(token pattern, word pattern matched leftmost-longest). Lucene's character tables are older than the regex
    module's: ``unknown`` (characters Lucene does not know) leaves every class and ``emoji`` (pictographs Lucene
    still counts as emoji) joins the emoji class; both are measured (lucene_unicode.py). ``ascii_only`` spells
    each class out as its ASCII members: the same grammar, three times faster, valid for ASCII text only."""

    def cls(*properties: str) -> str:
        props = "".join(rf"\p{{{p}}}" for p in properties)
        full = f"[[{props}]--[{unknown}]]" if unknown else f"[{props}]"
        if not ascii_only:
            return full
        members = [chr(c) for c in range(128) if regex.match(f"(?V1){full}", chr(c))]
        return "[" + "".join(regex.escape(c) for c in members) + "]" if members else NOTHING

    x = cls("WB=Extend", "WB=Format", "WB=ZWJ")  # WB4: these attach to whatever precedes them
    x = "" if x == NOTHING else x + "*"
    ahl, hl = cls("WB=ALetter", "WB=Hebrew_Letter") + x, cls("WB=Hebrew_Letter") + x
    nu, ka, enl = cls("WB=Numeric") + x, cls("WB=Katakana") + x, cls("WB=ExtendNumLet") + x
    mid_letter = cls("WB=MidLetter", "WB=MidNumLet", "WB=Single_Quote") + x  # WB6/7: "don't", "e.g"
    mid_num = cls("WB=MidNum", "WB=MidNumLet", "WB=Single_Quote") + x  # WB11/12: "3.14", "1,000"
    sq, dq = cls("WB=Single_Quote") + x, cls("WB=Double_Quote") + x
    katakana_block = rf"{ka}(?:(?:{enl})*{ka})*"  # WB13, WB13a/b
    letter_digit_block = (  # WB5-WB10: letters and digits join; mid-word punctuation only between like kinds
        rf"(?:{hl}(?:{sq}|{dq}{hl})"  # WB7a-c as Lucene reads them: a Hebrew letter and a quote
        rf"|{nu}(?:(?:(?:{enl})*|{mid_num}){nu})*"
        rf"|{ahl}(?:(?:(?:{enl})*|{mid_letter}){ahl})*)+"
    )
    block = rf"(?:{katakana_block}|{letter_digit_block})"
    word = rf"(?:{enl})*{block}(?:(?:{enl})+{block})*(?:{enl})*"  # underscores join anything (WB13a/b)
    emoji_base = (
        cls("Extended_Pictographic", "Emoji_Modifier")
        if ascii_only
        else rf"[\p{{Extended_Pictographic}}\p{{Emoji_Modifier}}{emoji}]"
    )
    emoji_sequence = (
        r"[0-9#*]\uFE0F?\u20E3"  # keycaps
        r"|\p{Regional_Indicator}\p{Regional_Indicator}"  # flags (a lone regional indicator is no token)
        rf"|{emoji_base}(?:[\p{{WB=Extend}}\p{{WB=Format}}]|\u200D{emoji_base}?)*"  # modifiers, ZWJ sequences, tags
    )
    southeast_asian = f"(?:{cls('Line_Break=Complex_Context')}{x})+"  # Thai, Lao, Myanmar, Khmer: one run
    single = cls("Script=Han", "Script=Hiragana") + x  # one ideograph / hiragana character per token
    # Lucene takes the longest alternative; a word is never shorter than an emoji sequence at the same position
    alternatives = [southeast_asian, word, emoji_sequence, single]
    if ascii_only:  # ASCII has no Thai, emoji or ideographs
        alternatives = [word]
    token = regex.compile("(?V1)" + "|".join(alternatives))
    return token, regex.compile(rf"(?V1p){word}")


TOKEN, WORD_LONGEST = token_patterns()
ASCII_TOKEN, _ = token_patterns(ascii_only=True)
_HEBREW_BEFORE_QUOTE = regex.compile(r'\p{WB=Hebrew_Letter}[\p{WB=Extend}\p{WB=Format}\p{WB=ZWJ}]*\Z')
_QUOTES = "'\""


def _utf16_length(text: str) -> int:
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def _cut_to_units(text: str, units: int) -> str:
    """The longest prefix of ``text`` within ``units`` UTF-16 units."""
    if text[:units].isascii():
        return text[:units]
    out, used = [], 0
    for c in text:
        used += 2 if ord(c) > 0xFFFF else 1
        if used > units:
            break
        out.append(c)
    return "".join(out)


def standard_tokens(text: str, patterns=None) -> list[str]:
    """Lucene StandardTokenizer's tokens (case kept)."""
    token_pattern, word_longest = patterns or (ASCII_TOKEN if text.isascii() else TOKEN, WORD_LONGEST)
    tokens: list[str] = []
    pos = 0
    while True:
        match = token_pattern.search(text, pos)
        if match is None:
            return tokens
        token = match.group()
        if match.end() < len(text) and text[match.end()] in _QUOTES and _HEBREW_BEFORE_QUOTE.search(token):
            # the greedy match can stop short of a Hebrew quote (צה"ל): take the leftmost-longest word instead
            longest = word_longest.match(text, match.start())
            token = longest.group() if longest and longest.end() > match.end() else token
        if len(token) > MAX_TOKEN_UNITS // 2 and _utf16_length(token) > MAX_TOKEN_UNITS:
            # Lucene's scanner sees at most 255 units at once: the longest token inside that window wins
            window = _cut_to_units(text[match.start() :], MAX_TOKEN_UNITS)
            token = token_pattern.match(window).group()
        tokens.append(token)
        pos = match.start() + len(token)


_POSSESSIVE_APOSTROPHES = ("'", "\u2019", "\uff07")
_JAVA_LOWER = {"\u0130": "i"}  # the one character whose Python lower() is two characters


def _remove_possessive(token: str) -> str:
    if len(token) >= 2 and token[-1] in "sS" and token[-2] in _POSSESSIVE_APOSTROPHES:
        return token[:-2]
    return token


def _lower(token: str) -> str:
    """Java's Character.toLowerCase per character: Python's lower() is context-sensitive for sigma only and
    expands İ to two characters; both are handled character by character."""
    if token.isascii() or ("\u03a3" not in token and "\u0130" not in token):
        return token.lower()
    return "".join(_JAVA_LOWER.get(c) or c.lower() for c in token)


def english_tokens(text: str, stopwords=LUCENE_STOPWORDS, stem: bool = True) -> list[str]:
    """pyserini's default analyzer: standard tokens, possessive removed, lower-cased, stop words out, Porter."""
    out = []
    for token in standard_tokens(text):
        token = _lower(_remove_possessive(token))
        if token in stopwords:
            continue
        out.append(porter_stem(token) if stem else token)
    return out
