"""The job-directory backend: the frontier, its files (journal, seen set, queues, checkpoint, host
file), their replay and reading, and its maintenance."""
