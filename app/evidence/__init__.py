"""The evidence record: an append-only, hash-chained, Ed25519-signed log of audits finished, forget sets exported,
verifications and erasures, holding no personal data (docs/reliability.md "Evidence")."""
