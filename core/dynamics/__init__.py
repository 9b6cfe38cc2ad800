"""PCFG corpora and loss-trajectory parsing for dynamics audits (pure: stdlib + numpy)."""
