"""The array engine: Array, its reads and writes (plan -> fetch -> decode/merge -> store),
selections (indexing), the thread pool (scheduling), streaming copies and views."""
