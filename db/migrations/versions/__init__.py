"""The revisions of the tuning log's schema, one per version (``vN_<what>.py``)."""
