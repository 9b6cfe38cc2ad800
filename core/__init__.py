"""memaudit's pure core: the measures, the property catalog and value handling, PCFG and trajectory parsing,
model-name parsing. Standard library and numpy only; imports neither the web app (`app`), the workers
(`workers`), the database nor torch. Both sides import it."""
