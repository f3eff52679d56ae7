"""The memory over HTTP: a JSON API under /api/ (routes in `routes`, models in `models`)."""
