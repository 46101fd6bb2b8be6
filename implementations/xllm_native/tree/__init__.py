"""The tree: where each role lives in an xLLM source tree, which manifest builds it, the C++ cut out of it, and
the facts the rest of the harness may ask of it (``facts.tree_facts``)."""
