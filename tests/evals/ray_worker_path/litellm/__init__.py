"""Not LiteLLM: first on the path of the Ray workers that tests/evals/test_ray_engine.py starts.

A worker running the offline model must never import LiteLLM (it costs seconds
per worker and is not needed); if one does, this makes the test fail loudly.
"""

raise ImportError("a Ray worker imported litellm while running the offline model")
