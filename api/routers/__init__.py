"""One router per resource; :mod:`api.main` includes them."""
