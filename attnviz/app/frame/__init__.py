"""The shell every screen shares: pages list, link notes and guard, session, loading, results, widgets."""
