"""The RARG agent's prompts and tool schemas, as data.

Source: RARG App. A (the BRIGHT retrieval setting). The paper shows its system prompt and tool schemas only as
figures; what the text says they contain is followed here, in our own words: the task is retrieval (high recall
of relevant documents while keeping precision), listing the corpus is forbidden, ``embed_recall`` writes a scope
file and returns only "scope file -> query", scoped search runs as ``cat scope | xargs -d '\\n' rg ...``, and the
final answer is a ranked list of exactly ten document paths (App. A.2). The initial user prompt wraps the query
(App. A.4). No random text anywhere: prompts are cache keys.
"""

from __future__ import annotations

SYSTEM_PROMPT = """You are a search agent. Find the documents of a local corpus that are relevant to a query and rank them.

The corpus is the folder corpus/ with one text file per document. It is too large to list: ls, find and rg --files are refused.

Tools:
- embed_recall(scope_query): ranks the whole corpus by semantic similarity to scope_query and writes the ranked paths to a new scope file. It returns "scopes/scope_N.txt -> scope_query".{paragraph_note}
- bash(command): runs one read-only pipeline of rg, grep, cat, head, tail, sed -n, wc, sort, uniq, cut and xargs. No redirection, no ';' or '&&', no $(...); put patterns in single quotes.
- read(path, offset, limit): returns lines offset to offset+limit-1 of a file.

How to search:
1. Start with embed_recall on the query.
2. Search a scope in its ranked order, so matches from the most similar documents come first:
   cat scopes/scope_1.txt | xargs -d '\\n' rg -n -i 'PATTERN'{match_note}
3. Read promising documents for context. When a scope is exhausted, call embed_recall again with a new angle.
Relevant documents may use other words than the query: try synonyms and related terms. Aim for high recall of relevant documents while keeping the ranking precise.

When you are done, reply without a tool call in exactly this format:
Final ranking:
1. corpus/<file>
2. corpus/<file>
List exactly {answer_size} document paths, most relevant first."""

PARAGRAPH_NOTE = (
    " After it come query-relevant paragraphs from the top documents, each in <qr_paragraph path=...> tags: "
    "use them as entry points for your searches, not as the answer."
)
MATCH_NOTE = "\n   The matches of a scoped search are shown best first by relevance to the scope query and the pattern."

USER_PROMPT = "Query: {query}\n\nRetrieve and rank the documents of corpus/ that are relevant to this query."

TURN_LIMIT_NOTE = "This is your last turn: give your final answer now, in the required format, without calling a tool."

# Harness, not in the paper (``nudges``): a reply with neither a tool call nor a ranking gets this reminder instead
# of ending the episode. Its example is in the fallback format, which is what small models without native tool
# calling read (tool_format.py); a 135M model copies the example, and without it makes no call at all.
NUDGE = (
    "Your reply has no tool call and no final ranking. Call a tool, for example\n"
    '<tool_call>[{{"name": "embed_recall", "arguments": {{"scope_query": "{query}"}}}}]</tool_call>\n'
    "or give your final ranking in the required format."
)

UNREADABLE_CALL = "Your tool call could not be read ({why}). Call a tool as {{\"name\": ..., \"arguments\": {{...}}}}, or give your final answer."

# RARG++'s constructed query opens with an instruction (sec. 3.4, "Instruct:..."); our wording.
MATCH_INSTRUCTION = "Given a search goal and the keywords of a grep pattern, retrieve the matched excerpt that best helps the search"


def system_prompt(answer_size: int, paragraphs: bool, match_rerank: bool) -> str:
    return SYSTEM_PROMPT.format(
        answer_size=answer_size, paragraph_note=PARAGRAPH_NOTE if paragraphs else "", match_note=MATCH_NOTE if match_rerank else ""
    )


def _function(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": {"type": "object", "properties": properties, "required": required}},
    }


def tool_schemas(generative_rerank: bool = False) -> list[dict]:
    """bash, read and embed_recall (App. A.3). ``generative_rerank`` gives bash the optional ``rerank_query`` of
    RerankAwareBash (RARG++'s generative variant, sec. 3.4)."""
    bash_properties = {"command": {"type": "string", "description": "e.g. cat scopes/scope_1.txt | xargs -d '\\n' rg -n -i 'pattern'"}}
    if generative_rerank:
        bash_properties["rerank_query"] = {
            "type": "string",
            "description": "only with rg: what the matches should be about (the overall goal and this search's intent); leave out otherwise",
        }
    return [
        _function(
            "bash",
            "Run one read-only search pipeline (rg, grep, cat, head, tail, sed -n, wc, sort, uniq, cut, xargs) in the folder that holds corpus/ and scopes/. rg scans files in the order given, so a scope keeps its ranking.",
            bash_properties, ["command"],
        ),
        _function(
            "read", "Read lines of a document or scope file.",
            {
                "path": {"type": "string", "description": "e.g. corpus/123.txt"},
                "offset": {"type": "integer", "description": "first line to read, 1-based (default 1)"},
                "limit": {"type": "integer", "description": "how many lines (default 200)"},
            },
            ["path"],
        ),
        _function(
            "embed_recall",
            "Rank the whole corpus by semantic similarity to scope_query, write the ranked paths to a new scope file, and return 'scope file -> scope_query'.",
            {"scope_query": {"type": "string", "description": "what relevant documents are about"}},
            ["scope_query"],
        ),
    ]
