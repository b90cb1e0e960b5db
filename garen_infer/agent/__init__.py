"""The RARG agent (``--method rarg | rarg+ | rarg++``): a tool loop over the corpus as files.

- ``sandbox.py`` runs the bash tool's commands (checked by ``shell_parse.py`` and ``command_rules.py``; programs
  located by ``binaries.py``);
- ``tools.py`` implements bash, read and embed_recall, with ``relevance.py`` (the embedder's rankings) and
  ``excerpts.py`` (paragraphs, matches, pattern keywords);
- ``loop.py`` is the per-query generator; ``compaction.py`` keeps its context short; ``answer.py`` reads the final
  ranking; ``transcript.py`` records (and prints) what happened; ``prompts.py`` holds the prompts and tool schemas.
"""
