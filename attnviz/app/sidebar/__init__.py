"""The shared attention configuration in the sidebar: its widgets, URL state, runs and downloads."""
