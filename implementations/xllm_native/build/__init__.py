"""The build: a tree's C++ compiled into a library once per source (``library.build``), with its compile commands,
cache keys, cache folder, dependency watch and compile-error diagnosis each in a module of its own."""
