"""The job contract: what a job is (``TrainSpec``), what states it goes through
(``JobState``/``JobStatus``), what every backend implements (``Backend``, ``LogLine``) and
how a spec is checked (``validate``). Nothing here runs a job; every layer above builds on it."""
