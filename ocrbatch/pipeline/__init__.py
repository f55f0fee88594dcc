"""The stages of a conversion; `run.py` joins them: discover → decode → batch → infer → write."""
