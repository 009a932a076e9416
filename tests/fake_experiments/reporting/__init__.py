"""Fake experiments of the report contract (the lab evaluates ``point``, the module reports)."""
