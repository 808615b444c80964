"""How the server is configured and how it reaches Redis."""
