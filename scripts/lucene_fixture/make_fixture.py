"""Regenerate tests/fixtures/lucene_english_tokens.json: Lucene's own tokens for a table of tricky strings, the
ground truth that garen_infer/index/lexical/lucene_analyzer.py is tested against.

BRIGHT's BM25 tokenizes with pyserini's default analyzer (Anserini's DefaultEnglishAnalyzer: StandardTokenizer,
EnglishPossessiveFilter, LowerCaseFilter, Lucene's English stop set, PorterStemFilter). Java 11+ runs the
driver LuceneTokens.java (beside this file) against a jar holding Lucene 9 and Anserini, e.g. the fat jar that
ships inside the pyserini wheel (no Maven needed):

    pip download --no-deps -d pyserini-wheel pyserini==0.24.0
    unzip -o pyserini-wheel/pyserini-0.24.0-py3-none-any.whl 'pyserini/resources/jars/*' -d pyserini-wheel
    python scripts/lucene_fixture/make_fixture.py --jar
        pyserini-wheel/pyserini/resources/jars/anserini-0.24.0-fatjar.jar

``--words FILE`` (one word a line) also records Lucene's Porter stem of each word (the ``stems`` table).
``--unicode`` instead rewrites garen_infer/index/lexical/lucene_unicode.py: Lucene's character tables are older than the
regex module's, so every code point is probed alone, between letters and between digits, and the characters
Lucene treats as unknown, or as emoji where the regex module does not, are written down.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = REPO / "tests" / "data" / "lucene_english_tokens.json"
UNICODE_OUT = REPO / "garen_infer" / "index" / "lexical" / "lucene_unicode.py"

TRICKY = {
    "numbers": [
        "3.14 and 1,000 and 1.000.000,5", "pi is 3.14159, e is 2.71828.", "-42 +3 0x1F 1e-10 1.5e10 6.02E23",
        "v1.2.3 2024-01-15 12:30:45 3/4 1:2 50% $100 €20", ",5 5, 3..4 3.4.5 1,2,3 .5", "10^-3 10−3 ±0.5 p<0.05 n=12",
        "x² H₂O ½ ⅓ Ⅻ ①", "ＡＢＣ１２３ ４５", "٣٤٥ ३४५ 12३",
    ],
    "hyphens and underscores": [
        "state-of-the-art well-known e-mail", "COVID-19 SARS-CoV-2 IL-6 B-52 a-1",
        "___ _a_ a__b foo_bar __init__ --x -- ...",
        "snake_case camelCase PascalCase kebab-case", "em—dash en–dash a‐b a‑b",
    ],
    "apostrophes and possessives": [
        "don't can't won't it's I'm we'll", "John's JOHN'S Johns' students' rock 'n' roll", "John’s O’Neil’s don’t",
        "John＇s", "'s 's' ''quoted'' 'single'", "James's Chris' boss's", "l'homme d'Artagnan",
    ],
    "dots and colons": [
        "U.S.A. e.g. i.e. a.b.c a..b", "Mr. Smith vs. Dr. Who", "std::vector<int> a:b S:t 12:30 a::b",
        "end. Start", "file.txt archive.tar.gz .hidden", "ellipsis... and…this",
    ],
    "code": [
        "def foo(x): return x**2", "a->b i++ x!=y arr[i]=0; x+=1", "#include <stdio.h>", "C++ C# .NET node.js",
        "print(\"hello, world\")", "SELECT * FROM t WHERE id=5;", "if (a && b || !c) { return; }",
        "lambda x: x@y % 2", "obj.method().attr[0]", "<div class=\"x\">text</div>", "${VAR} $HOME ~/path/to/file",
    ],
    "latex": [
        "\\frac{a^2}{b_1} + \\sqrt{x}", "$x_{i,j}$ and $$\\sum_{k=1}^{n} k$$", "\\alpha\\beta\\gamma", "e^{i\\pi}+1=0",
        "\\mathbb{R}^n \\to \\mathbb{R}", "f'(x) = 2x, f''(x)",
    ],
    "urls and emails": [
        "https://www.example.com/path/to?q=1&b=2#frag", "www.google.com and http://x.y/z", "user@example.com",
        "john.doe+tag@mail.example.org", "ftp://files.example.net/pub/file-1.0.tar.gz", "@mention #hashtag",
    ],
    "non-ascii": [
        "naïve café résumé Straße ß", "İstanbul ISTANBUL ıi", "ΣΊΣΥΦΟΣ Ελληνικά σοφός", "Москва ЁЛКА",
        "עברית שׁלום צה\"ל", "א'1 א'ב אב' a'1",
        "العربية", "हिन्दी", "e\u0301 cafe\u0301", "ﬁ ﬂ", "µm °C Å ǅ ℝ", "Ǆ ǆ Ω", "a\u00adb soft\u00adhyphen",
        "zero\u200bwidth", "nbsp\u00a0space", "a\u200db", "\ufeffbom",
    ],
    "cjk and south-east asian": [
        "日本語の文章", "中文分词测试", "カタカナ ひらがな", "カタカナabc", "漢字カナかな", "한국어 텍스트",
        "ไทย ภาษาไทย",
        "ລາວ ကမ္ဘာ ខ្មែរ", "ｶﾀｶﾅ", "ー", "日本2024年",
    ],
    "emoji": [
        "😀 😀😀 abc😀def 1😀", "👍🏽 👨‍👩‍👧 🇺🇸 🇺🇸🇬🇧 🇺", "1️⃣ #️⃣ *️⃣ ☺️ ©️ © ® ™", "❤️‍🔥 🏴󠁧󠁢󠁥󠁮󠁧󠁿", "a‍😀 😀‍a", "a 🏻 b",
        "★ ☆ ♥ ✓ ✔", "👩🏽‍💻", "🫠",
    ],
    "whitespace and control": [
        "", "   ", "\n\n", "a\tb\nc\r\nd", "a\u0000b", "a\u2028b\u2029c", "\u3000全角",
    ],
    "stop words": [
        "The AND a An and THE", "it is not that", "this is a test of the system", "To be or not to be",
        "such as these are their then there they was will with by", "IN INTO IF NO",
    ],
    "long tokens": [  # Lucene's scanner sees 255 UTF-16 units at a time: the longest token inside them wins
        "a" * 254, "b" * 255, "c" * 256, "d" * 600, "1" * 300, "x" * 253 + "'s", "x" * 254 + "'s", "1" * 254 + ".5",
        "a" * 250 + "_" * 10 + "b", "a" * 254 + "😀b", "😀" * 3 + "é" * 300,
    ],
    "prose": [
        "Why do stars disappear when I look at them? Cones function best in relatively bright light.",
        "The World Health Organization recommends washing hands for at least 20 seconds.",
        "Given an array nums of n integers, return the maximum number of points on the same straight line.",
        "Running runs ran; caresses ponies ties; hopping tanned falling; relational conditional rational.",
    ],
}


def run_lucene(jar: str, texts: list[str]) -> list[dict]:
    lines = "".join(base64.b64encode(t.encode("utf-8")).decode() + "\n" for t in texts)
    java = subprocess.run(["java", "-cp", jar, str(HERE / "LuceneTokens.java")], input=lines.encode(),
                          capture_output=True, check=True)
    version = java.stderr.decode().strip().splitlines()[-1]
    return [json.loads(line) for line in java.stdout.decode("utf-8").splitlines()], version


def _python_string(body: str, width: int = 100) -> str:
    """A regex class body as a parenthesised Python string literal, wrapped at range boundaries."""
    items = re.findall(r"\\[uU][0-9A-F]+(?:-\\[uU][0-9A-F]+)?", body)
    lines, line = [], ""
    for item in items:
        if len(line) + len(item) > width:
            lines.append(line)
            line = ""
        line += item
    lines.append(line)
    return "(\n" + "".join(f'    "{chunk}"\n' for chunk in lines) + ")"


def _ranges(code_points: list[int]) -> str:
    """A regex class body: ``\\uXXXX-\\uYYYY`` ranges."""
    spans: list[list[int]] = []
    for c in sorted(code_points):
        if spans and c == spans[-1][1] + 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    def esc(c: int) -> str:
        return f"\\u{c:04X}" if c <= 0xFFFF else f"\\U{c:08X}"

    return "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in spans)


def unicode_tables(jar: str) -> int:
    import unicodedata

    import regex

    sys.path.insert(0, str(REPO))
    from garen_infer.index.lexical.lucene_analyzer import standard_tokens, token_patterns

    pictographic = regex.compile(r"\p{Extended_Pictographic}")
    points = [c for c in range(0x20, 0x110000) if not 0xD800 <= c <= 0xDFFF
              and (unicodedata.category(chr(c)) not in ("Cn", "Co") or pictographic.match(chr(c)))]
    probes = [(chr(c), f"a{chr(c)}a", f"1{chr(c)}1") for c in points]
    outputs, version = run_lucene(jar, [t for trio in probes for t in trio])
    lucene = [[[t for t, _ in outputs[3 * i + j]["standard"]] for j in range(3)] for i in range(len(points))]
    types = [outputs[3 * i]["standard"] for i in range(len(points))]
    raw = token_patterns("", "")
    as_other = [[], ["a", "a"], ["1", "1"]]  # a character Lucene treats as neither letter nor digit
    unknown, emoji = [], []
    for c, trio, lucene_out, single in zip(points, probes, lucene, types):
        python_out = [standard_tokens(t, raw) for t in trio]
        if python_out == lucene_out:
            continue
        if single == [[chr(c), "<EMOJI>"]] and python_out[0] == []:
            emoji.append(c)
        elif lucene_out == as_other:
            unknown.append(c)
    fixed = token_patterns(_ranges(unknown), _ranges(emoji))
    left = [
        c
        for c, trio, lucene_out in zip(points, probes, lucene)
        if [standard_tokens(t, fixed) for t in trio] != lucene_out
    ]
    still = f"{len(left)} still differ after these two tables: " + ", ".join(f"U+{c:04X}" for c in left) + "."
    UNICODE_OUT.write_text(
        '"""Where Lucene\'s character tables differ from the regex module\'s (generated by\n'
        f"scripts/lucene_fixture/make_fixture.py --unicode from {version}: {len(points):,} code points probed alone,\n"
        f"between letters and between digits).\n" + textwrap.fill(still, 110) + '\n"""\n\n'
        f"# {len(unknown)} code points Lucene treats as unknown (assigned after its Unicode version, or reclassified)\n"
        f"UNKNOWN_TO_LUCENE = {_python_string(_ranges(unknown))}\n"
        f"# {len(emoji)} code points Lucene emits as emoji that the regex module's Extended_Pictographic leaves out\n"
        f"LUCENE_EMOJI = {_python_string(_ranges(emoji))}\n",
        encoding="utf-8",
    )
    print(f"{len(unknown)} unknown, {len(emoji)} emoji, {len(left)} left -> {UNICODE_OUT}", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jar", required=True, help="a jar with Lucene 9 and Anserini (the pyserini wheel's fat jar)")
    parser.add_argument("--words", help="a word list: record Lucene's Porter stem of each word as well")
    parser.add_argument("--unicode", action="store_true",
                        help="rewrite garen_infer/index/lexical/lucene_unicode.py instead")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    if args.unicode:
        return unicode_tables(args.jar)
    cases = [(group, text) for group, texts in TRICKY.items() for text in texts]
    outputs, version = run_lucene(args.jar, [text for _, text in cases])
    fixture = {
        "about": "Lucene's tokens for tricky strings; regenerate with scripts/lucene_fixture/make_fixture.py",
        "lucene": version,
        "analyzer": 'io.anserini.analysis.DefaultEnglishAnalyzer.newStemmingInstance("porter")',
        "cases": [
            {"group": g, "text": t, "standard": o["standard"], "english": o["english"]}
            for (g, t), o in zip(cases, outputs)
        ],
    }
    if args.words:
        words = [w for w in Path(args.words).read_text(encoding="utf-8").split() if w]
        stems, _ = run_lucene(args.jar, words)
        # a stop word has no stem (the analyzer drops it); those are left out
        fixture["stems"] = {w: o["english"][0] for w, o in zip(words, stems) if len(o["english"]) == 1}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    stems = f", {len(fixture['stems'])} stems" if "stems" in fixture else ""
    print(f"{len(cases)} cases{stems} from {version} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
