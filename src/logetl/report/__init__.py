"""The traffic report: its panels, the page that shows them and where its clients come from."""
