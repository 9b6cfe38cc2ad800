"""A person's request (GDPR Art. 12-19): intake, the one-month deadline, the audits, the deliveries of forget sets to
registered recipients, the verification after unlearning, and the reply (docs/requests.md)."""
