"""Build-time scripts (training the shipped tiny models). Not part of the runtime packages."""
