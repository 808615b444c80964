"""What the server tells about itself: snapshot files, /metrics, monitor text."""
