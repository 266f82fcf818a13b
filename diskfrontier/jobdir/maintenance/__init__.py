"""Work on a job directory as a whole: compaction, format upgrades, verify and repair."""
