"""The run monitor: run documents, the store, the web app."""
