"""The operator's console at /dashboard/: server-rendered pages."""
