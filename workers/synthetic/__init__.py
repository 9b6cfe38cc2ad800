"""Synthetic recommendation catalogs with known training membership (coverage ground truth)."""
