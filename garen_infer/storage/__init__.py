"""Storage primitives every folder uses: atomic writes, append-only logs, the writer lock, folder
kinds, TREC files and the fault points tests kill a process at."""
