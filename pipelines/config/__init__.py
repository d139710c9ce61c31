"""Configuration: the typed deployment settings and the node pools file."""
